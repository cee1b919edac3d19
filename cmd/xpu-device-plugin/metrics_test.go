package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

// TestMetricsOnTheHealthAddress: the running plugin (no kubelet yet) serves
// its metrics, with its build info, on --health-address.
func TestMetricsOnTheHealthAddress(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.P800x8())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	log := logrus.New()
	log.SetOutput(io.Discard)
	app := newApp(log)
	app.Writer, app.ErrWriter = io.Discard, io.Discard
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(ctx, []string{
			"xpu-device-plugin", "--dev-root", tree.Root, "--driver-root", tree.Root,
			"--device-plugin-path", testutil.ShortDir(t, "xdpm"), "--health-address", addr,
		})
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // a test of a loopback server
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		body = string(data)
		return err == nil && resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, body, `xpu_device_plugin_build_info{commit="unknown",version="dev"} 1`)
	require.Contains(t, body, `xpu_device_plugin_device_health_changes_total{health="Unhealthy"} 0`)
	require.Contains(t, body, "xpu_device_plugin_relayouts_total 0")
	require.Contains(t, body, "process_start_time_seconds")
}
