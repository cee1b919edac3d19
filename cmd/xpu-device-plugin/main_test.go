package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout bytes.Buffer
	log := logrus.New()
	log.SetOutput(io.Discard)
	app := newApp(log)
	app.Writer = &stdout
	app.ErrWriter = io.Discard
	err := app.Run(append([]string{"xpu-device-plugin"}, args...))
	return stdout.String(), err
}

func TestHelpShowsFlagsAndEnv(t *testing.T) {
	out, err := run(t, "--help")
	require.NoError(t, err)
	for _, s := range []string{
		"--vendor", "[$XPU_CDI_VENDOR]", "--class", "[$XPU_CDI_CLASS]",
		"--dev-root", "[$XPU_CDI_DEV_ROOT, $XPU_DEV_ROOT]", "--driver-root",
		`--device-plugin-path DIR`, `(default: "/var/lib/kubelet/device-plugins") [$XPU_CDI_DEVICE_PLUGIN_PATH]`,
		`--resource-name value`, `(default: "baidu.com/xpu") [$XPU_CDI_RESOURCE_NAME]`,
		`cdi-cri, cdi-annotations or volume-mounts (default: "cdi-cri") [$XPU_CDI_DEVICE_LIST_STRATEGY]`,
		`--poll-interval value, --health-check-interval value`, `(default: 10s) [$XPU_CDI_POLL_INTERVAL, $XPU_CDI_HEALTH_CHECK_INTERVAL]`,
		"xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml",
		"--config-file FILE", "[$XPU_CDI_CONFIG_FILE, $CONFIG_FILE]", "--replicas N", "(default: 1) [$XPU_CDI_REPLICAS]",
		"[$XPU_CDI_RENAME_BY_DEFAULT]", "[$XPU_CDI_FAIL_REQUESTS_GREATER_THAN_ONE]", "NO memory or fault isolation",
		`--partition-strategy value`, `(default: "mixed") [$XPU_CDI_PARTITION_STRATEGY]`, "baidu.com/xpu-24gb",
	} {
		require.Contains(t, out, s)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--device-list-strategy", "mounts"}, `--device-list-strategy: unknown device list strategy "mounts": use one of cdi-cri, cdi-annotations, volume-mounts`},
		{[]string{"--resource-name", "xpu"}, `--resource-name: resource name "xpu" is not DOMAIN/NAME`},
		{[]string{"--partition-strategy", "MIG"}, `--partition-strategy: unknown partition strategy "MIG": use mixed`},
		{[]string{"--vendor", "Baidu com"}, "--vendor/--class"},
		{[]string{"--poll-interval", "1ms"}, "--poll-interval 1ms is too short"},
		{[]string{"--health-check-interval", "1ms"}, "--poll-interval 1ms is too short"},
		{[]string{"--device-plugin-path", ""}, "--device-plugin-path is empty"},
		{[]string{"--log-level", "loud"}, "--log-level"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			_, err := run(t, tc.args...)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestBadFlagFromEnv(t *testing.T) {
	t.Setenv("XPU_CDI_DEVICE_LIST_STRATEGY", "volumes")
	_, err := run(t)
	require.ErrorContains(t, err, `unknown device list strategy "volumes"`)
}

func TestBadSharing(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		return path
	}
	good := write("good.yaml", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: 2}\n")
	for _, tc := range []struct {
		description string
		args        []string
		err         string
	}{
		{
			"unknown key",
			[]string{"--config-file", write("typo.yaml", "version: v1\nsharing:\n  timeslicing: {}\n")},
			"--config-file: sharing configuration " + dir + "/typo.yaml: line 3: unknown key sharing.timeslicing (known here: timeSlicing)",
		},
		{"zero replicas", []string{"--config-file", write("zero.yaml", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: 0}\n")}, "0 replicas: give at least 1"},
		{"not our resource", []string{"--config-file", write("nv.yaml", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n")}, `"nvidia.com/gpu" is not this plugin's resource baidu.com/xpu`},
		{"a bad rename of a partition size", []string{"--config-file", write("rename24.yaml", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu-24gb, rename: quarter, replicas: 2}\n")}, `the shared resource name: resource name "quarter" is not DOMAIN/NAME`},
		{"a bad rename", []string{"--config-file", write("rename.yaml", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, rename: shared, replicas: 2}\n")}, `the shared resource name: resource name "shared" is not DOMAIN/NAME`},
		{"missing file", []string{"--config-file", filepath.Join(dir, "none.yaml")}, "none.yaml: no such file"},
		{"file and flags", []string{"--config-file", good, "--replicas", "3"}, "--replicas and --config-file " + good + " both set sharing: give one"},
		{"replicas below one", []string{"--replicas", "0"}, "--replicas: 0 replicas: give at least 1"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, err := run(t, tc.args...)
			require.ErrorContains(t, err, tc.err)
		})
	}
}
