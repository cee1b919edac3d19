package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin/kubelettest"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

// TestWritesNodeLabels: the plugin keeps the NFD feature file equal to the
// host and its sharing, and removes it when it stops.
func TestWritesNodeLabels(t *testing.T) {
	testreq.Root(t, "the fake host's device nodes are made with mknod")
	tree := fakehosttest.Build(t, fakehost.P800x8())
	pluginDir := testutil.ShortDir(t, "xdp")
	k, err := kubelettest.Start(pluginDir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	file := filepath.Join(t.TempDir(), "xpu-device-plugin")

	log := logrus.New()
	log.SetOutput(io.Discard)
	app := newApp(log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(ctx, []string{
			"xpu-device-plugin", "--dev-root", tree.Root, "--driver-root", tree.Root,
			"--device-plugin-path", pluginDir, "--device-list-strategy", "volume-mounts", "--replicas", "3", "--rename-by-default",
			"--health-check-interval", "100ms", "--labels-file", file, "--remove-labels-on-exit",
		})
	}()
	reg, err := k.WaitRegistration(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, "baidu.com/xpu.shared", reg.Request.ResourceName)
	devs, err := reg.NextDevices(ctxT(t))
	require.NoError(t, err)
	require.Len(t, devs, 24)

	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(data), "baidu.com/xpu.count=8\n")
	require.Contains(t, string(data), "baidu.com/xpu.sharing-strategy=time-slicing\nbaidu.com/xpu.replicas=3\n")

	// An XPU goes away: the count follows at the next health check.
	require.NoError(t, os.Remove(tree.Path("/dev/xpu7")))
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(file)
		return err == nil && bytesContain(data, "baidu.com/xpu.count=7\n")
	}, 5*time.Second, 20*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not stop")
	}
	require.NoFileExists(t, file, "--remove-labels-on-exit")
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func bytesContain(data []byte, s string) bool { return strings.Contains(string(data), s) }
