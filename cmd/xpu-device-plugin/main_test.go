package main

import (
	"bytes"
	"io"
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
		`--health-check-interval value`, `(default: 10s) [$XPU_CDI_HEALTH_CHECK_INTERVAL]`,
		"xpu-cdi generate --output /var/run/cdi/baidu.com-xpu.yaml",
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
		{[]string{"--vendor", "Baidu com"}, "--vendor/--class"},
		{[]string{"--health-check-interval", "1ms"}, "--health-check-interval 1ms is too short"},
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
