package daemon

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test of a loopback server
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestHealth(t *testing.T) {
	var mu sync.Mutex
	notReady := errors.New("not registered with the kubelet yet")
	h, err := ListenHealth("127.0.0.1:0", func() error { mu.Lock(); defer mu.Unlock(); return notReady })
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	base := "http://" + h.Addr()

	code, body := get(t, base+LivenessPath)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, body = get(t, base+ReadinessPath)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: not registered with the kubelet yet\n", body)
	mu.Lock()
	notReady = nil
	mu.Unlock()
	code, body = get(t, base+ReadinessPath)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, _ = get(t, base+"/metrics")
	require.Equal(t, http.StatusNotFound, code)

	cancel()
	require.NoError(t, <-done)
	_, err = http.Get(base + LivenessPath) //nolint:noctx // a test of a loopback server
	require.Error(t, err, "stopped with its context")
}

func TestHealthOff(t *testing.T) {
	h, err := ListenHealth("", nil)
	require.NoError(t, err)
	require.Nil(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, h.Serve(ctx))
}

func TestHealthAddressInUse(t *testing.T) {
	h, err := ListenHealth("127.0.0.1:0", func() error { return nil })
	require.NoError(t, err)
	defer h.l.Close()
	_, err = ListenHealth(h.Addr(), func() error { return nil })
	require.ErrorContains(t, err, "health endpoint "+h.Addr())
}

// TestStartHealthWaitsForThePort: an address another process holds (the
// old pod of a rolling update on the host network) is taken once it is
// free, and said once meanwhile; any other listen error is returned.
func TestStartHealthWaitsForThePort(t *testing.T) {
	held, err := ListenHealth("127.0.0.1:0", func() error { return errors.New("the old pod") })
	require.NoError(t, err)
	addr := held.Addr()
	oldCtx, stopOld := context.WithCancel(context.Background())
	oldDone := make(chan error, 1)
	go func() { oldDone <- held.Serve(oldCtx) }()
	log := &logtest.Recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, StartHealth(ctx, addr, func() error { return nil }, log))
	require.Equal(t, 1, log.Count("trying again"), log.String())
	code, body := get(t, "http://"+addr+ReadinessPath)
	require.Equal(t, http.StatusServiceUnavailable, code, "still the old pod's endpoint: %s", body)
	stopOld()
	require.NoError(t, <-oldDone)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + ReadinessPath) //nolint:noctx // a test of a loopback server
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "the new endpoint took the freed port")
	require.Equal(t, 1, log.Count("trying again"), "said once")

	require.ErrorContains(t, StartHealth(ctx, "127.0.0.1:not-a-port", nil, log), "health endpoint 127.0.0.1:not-a-port")
}

// klog's messages reach the logrus logger in its format, filtered by its
// level: V(0) at info, V(2) and V(4) only at debug, V(5) only at trace.
func TestRouteKlog(t *testing.T) {
	defer klog.ClearLogger()
	for _, tc := range []struct {
		level     logrus.Level
		want, not []string
	}{
		{level: logrus.InfoLevel, want: []string{`level=info msg="helper started" driver=xpu.baidu.com`, `level=error msg="publish failed" error=refused`}, not: []string{"v4 detail", "v5 trace"}},
		{level: logrus.DebugLevel, want: []string{`level=debug msg="v2 detail" claim=c1`, `level=debug msg="v4 detail"`}, not: []string{"v5 trace"}},
		{level: logrus.TraceLevel, want: []string{`level=debug msg="v4 detail"`, `level=trace msg="v5 trace" logger=dra`}},
		{level: logrus.WarnLevel, want: []string{`level=error msg="publish failed"`}, not: []string{"helper started"}},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			var out strings.Builder
			log := logrus.New()
			log.SetOutput(&out)
			log.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
			log.SetLevel(tc.level)
			require.NoError(t, RouteKlog(log))
			klog.InfoS("helper started", "driver", "xpu.baidu.com")
			klog.ErrorS(errors.New("refused"), "publish failed")
			klog.V(2).InfoS("v2 detail", "claim", "c1")
			klog.V(4).Info("v4 detail")
			klog.LoggerWithName(klog.Background(), "dra").V(5).Info("v5 trace")
			klog.Flush()
			for _, w := range tc.want {
				require.Contains(t, out.String(), w)
			}
			for _, n := range tc.not {
				require.NotContains(t, out.String(), n)
			}
		})
	}
}
