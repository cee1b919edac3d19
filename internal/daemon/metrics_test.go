package daemon

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
)

// TestHealthServesMetrics: with a registry, GET /metrics on the health
// address serves it (the build-info gauge, the daemon's own counters);
// only GET is served.
func TestHealthServesMetrics(t *testing.T) {
	reg := NewRegistry("xpu_test_daemon", "1.2.3", "abc123")
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "xpu_test_daemon_things_total", Help: "Things."})
	reg.MustRegister(c)
	c.Add(3)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := ListenHealth("127.0.0.1:0", func() error { return nil }, WithMetrics(reg))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	base := "http://" + h.Addr()

	code, body := get(t, base+MetricsPath)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `xpu_test_daemon_build_info{commit="abc123",version="1.2.3"} 1`)
	require.Contains(t, body, "xpu_test_daemon_things_total 3")
	require.Contains(t, body, "go_goroutines ")
	code, body = get(t, base+LivenessPath)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)

	resp, err := http.Post(base+MetricsPath, "text/plain", strings.NewReader("")) //nolint:noctx // a test of a loopback server
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	cancel()
	require.NoError(t, <-done)
}

// TestStartHealthSaysMetrics: the log line names /metrics when it is served.
func TestStartHealthSaysMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &logtest.Recorder{}
	require.NoError(t, StartHealth(ctx, "127.0.0.1:0", func() error { return nil }, log, WithMetrics(prometheus.NewRegistry())))
	require.Eventually(t, func() bool { return strings.Contains(log.String(), MetricsPath) }, 5*time.Second, 10*time.Millisecond)
}

// TestBuildInfoLints: the build-info gauge follows the naming conventions.
func TestBuildInfoLints(t *testing.T) {
	problems, err := testutil.GatherAndLint(NewRegistry("xpu_test_daemon", "dev", "unknown"), "xpu_test_daemon_build_info")
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestHealthBoundsConnections: MaxHealthConns idle connections hold the
// endpoint; one more request waits until one of them ends.
func TestHealthBoundsConnections(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := ListenHealth("127.0.0.1:0", func() error { return nil }, WithMetrics(prometheus.NewRegistry()))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	var held []net.Conn
	for range MaxHealthConns {
		c, err := net.Dial("tcp", h.Addr())
		require.NoError(t, err)
		held = append(held, c)
	}
	client := &http.Client{Timeout: 500 * time.Millisecond}
	_, err = client.Get("http://" + h.Addr() + LivenessPath) //nolint:noctx // a test of a loopback server
	require.Error(t, err, "a request beyond the bound waits")
	require.NoError(t, held[0].Close())
	client.Timeout = 5 * time.Second
	resp, err := client.Get("http://" + h.Addr() + MetricsPath) //nolint:noctx // a test of a loopback server
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, c := range held[1:] {
		c.Close()
	}
}
