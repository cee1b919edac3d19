package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout bytes.Buffer
	log := logrus.New()
	log.SetOutput(io.Discard)
	app := newApp(log)
	app.Writer = &stdout
	app.ErrWriter = io.Discard
	err := app.Run(append([]string{"xpu-dra-driver"}, args...))
	return stdout.String(), err
}

func TestHelpShowsFlagsAndEnv(t *testing.T) {
	out, err := run(t, "--help")
	require.NoError(t, err)
	for _, s := range []string{
		`--dra-driver-name value, --driver-name value`, `(default: "xpu.baidu.com") [$XPU_CDI_DRA_DRIVER_NAME]`,
		`[$NODE_NAME, $XPU_CDI_NODE_NAME]`, "[$XPU_CDI_VENDOR]", "[$XPU_CDI_CLASS]",
		"--dev-root", "[$XPU_CDI_DEV_ROOT, $XPU_DEV_ROOT]", "--driver-root",
		`(default: 10s) [$XPU_CDI_POLL_INTERVAL, $XPU_CDI_HEALTH_CHECK_INTERVAL]`, "[$KUBECONFIG]", "[$XPU_CDI_PLUGIN_DATA_DIR]",
		`(default: "/var/lib/kubelet/plugins_registry") [$XPU_CDI_PLUGIN_REGISTRY_DIR]`,
		"xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml", "print-slice",
		"without memory or fault isolation",
	} {
		require.Contains(t, out, s)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--node-name", "n", "--dra-driver-name", "XPU"}, `--dra-driver-name: driver name "XPU"`},
		{[]string{"--node-name", "n", "--driver-name", "XPU"}, `--dra-driver-name: driver name "XPU"`},
		{[]string{"--node-name", "n", "--vendor", "Baidu com"}, "--vendor/--class"},
		{[]string{"--node-name", "n", "--poll-interval", "1ms"}, "--poll-interval 1ms is too short"},
		{[]string{"--node-name", ""}, "--node-name (or NODE_NAME) is empty"},
		{[]string{"--node-name", "n", "--log-level", "loud"}, "--log-level"},
		{[]string{"print-slice", "--driver-name", "a_b"}, `--dra-driver-name: driver name "a_b"`},
	} {
		t.Run(tc.args[len(tc.args)-2], func(t *testing.T) {
			t.Setenv("NODE_NAME", "")
			_, err := run(t, tc.args...)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// print-slice prints the slice of a fake host, decodable strictly as a
// ResourceSlice (the golden files of package dra hold the whole text).
func TestPrintSlice(t *testing.T) {
	testreq.Root(t, "discovery stats real device nodes, made with mknod")
	tree := fakehosttest.Build(t, fakehost.Degraded())
	out, err := run(t, "print-slice", "--dev-root", tree.Root, "--driver-root", tree.Root, "--node-name", "gpu-7", "--cdi-spec-dir", t.TempDir())
	require.NoError(t, err)
	var s resourceapi.ResourceSlice
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &s))
	require.Equal(t, "gpu-7", *s.Spec.NodeName)
	require.Equal(t, "xpu.baidu.com", s.Spec.Driver)
	require.Len(t, s.Spec.Devices, 3)
	// No spec in the directory: every device is tainted and says so.
	for _, d := range s.Spec.Devices {
		require.NotEmpty(t, d.Taints, d.Name)
	}
	require.Equal(t, "ERROR", s.Spec.Devices[2].Taints[0].Value)
	require.Equal(t, "NoCDISpec", s.Spec.Devices[0].Taints[0].Value)
}

// On a host without XPU print-slice prints an empty slice, not an error.
func TestPrintSliceNoXPU(t *testing.T) {
	root := t.TempDir()
	out, err := run(t, "print-slice", "--dev-root", root, "--driver-root", root, "--node-name", "cpu-1")
	require.NoError(t, err)
	var s resourceapi.ResourceSlice
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &s))
	require.Empty(t, s.Spec.Devices)
}

// A driver started before the kubelet waits for the plugin registry
// instead of failing (a DaemonSet pod would crash-loop).
func TestWaitForKubelet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugins_registry")
	log := logrus.New()
	rec := &logtest.Recorder{}
	log.SetOutput(io.Discard)
	log.AddHook(hook{rec})
	done := make(chan error, 1)
	go func() { done <- waitForDir(context.Background(), dir, log) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before the directory exists: %v", err)
	default:
	}
	require.NoError(t, os.Mkdir(dir, 0o755))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting 5s after the directory appeared")
	}
	require.True(t, rec.Has("waiting for the kubelet: its plugin registry "+dir+" does not exist yet"), rec.String())

	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.ErrorContains(t, waitForDir(context.Background(), file, log), "is not a directory")
}

type hook struct{ r *logtest.Recorder }

func (hook) Levels() []logrus.Level { return logrus.AllLevels }
func (h hook) Fire(e *logrus.Entry) error {
	h.r.Warnf("%s", e.Message)
	return nil
}
