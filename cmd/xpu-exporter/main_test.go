package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/xpu-cdi/xpu-cdi/internal/exporter"
	"github.com/xpu-cdi/xpu-cdi/internal/exporter/xpusmi"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func run(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	var stdout bytes.Buffer
	log := logrus.New()
	log.SetOutput(io.Discard)
	app := newApp(log)
	app.Writer = &stdout
	app.ErrWriter = io.Discard
	err := app.RunContext(ctx, append([]string{"xpu-exporter"}, args...))
	return stdout.String(), err
}

func TestHelpShowsFlagsAndEnv(t *testing.T) {
	out, err := run(t, context.Background(), "--help")
	require.NoError(t, err)
	for _, s := range []string{
		`--web.listen-address ADDRESS`, `(default: ":9507")`, "[$XPU_CDI_EXPORTER_LISTEN_ADDRESS]",
		`--web.telemetry-path PATH`, `(default: "/metrics")`, "--web.config.file FILE",
		`(default: "/var/lib/kubelet/pod-resources/kubelet.sock") [$XPU_CDI_POD_RESOURCES_SOCKET]`,
		"--dev-root", "--driver-root", "--host-root", "[$XPU_CDI_HOST_ROOT]", "--xpu-smi PATH", "[$XPU_CDI_XPU_SMI]",
		"xpu_exporter_source_up", "parent_pci_bus_id",
		"--min-collection-interval DURATION", `(default: 5s) [$XPU_CDI_EXPORTER_MIN_COLLECTION_INTERVAL]`,
		"--collection-wait", "[$XPU_CDI_EXPORTER_COLLECTION_WAIT]", "--collection-stuck-after", "[$XPU_CDI_EXPORTER_COLLECTION_STUCK_AFTER]",
		"--max-pods-per-xpu N", "(default: 16) [$XPU_CDI_EXPORTER_MAX_PODS_PER_XPU]",
		"--web.max-connections N", "(default: 32) [$XPU_CDI_EXPORTER_MAX_CONNECTIONS]",
		"exported_pod", "/healthz",
		"--config-file FILE", "[$XPU_CDI_CONFIG_FILE]",
		"--self-pod-name NAME", "[$XPU_CDI_EXPORTER_POD_NAME]", "--self-pod-namespace NAMESPACE", "[$XPU_CDI_EXPORTER_POD_NAMESPACE]",
	} {
		require.Contains(t, out, s)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--web.telemetry-path", "metrics"}, `--web.telemetry-path "metrics"`},
		{[]string{"--xpu-smi", "xpu-smi"}, `--xpu-smi "xpu-smi": give an absolute, clean path`},
		{[]string{"--xpu-smi-timeout", "1ms"}, "--xpu-smi-timeout 1ms is too short"},
		{[]string{"--vendor", "Baidu com"}, "--vendor/--class"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--web.config.file", "/nonexistent/web.yml"}, "--web.config.file /nonexistent/web.yml"},
		{[]string{"--host-root", "/", "--dev-root", "/"}, "give --host-root alone"},
		{[]string{"--max-pods-per-xpu", "0"}, "--max-pods-per-xpu 0: give at least 1"},
		{[]string{"--web.max-connections", "-1"}, "--web.max-connections -1: give at least 1"},
		{[]string{"--min-collection-interval", "-1s"}, "--min-collection-interval -1s is negative"},
		{[]string{"--collection-wait", "0s"}, "--collection-wait 0s is too short"},
		{[]string{"--collection-stuck-after", "10s"}, "--collection-stuck-after 10s is shorter than a working collection may take: give at least 20s"},
		{[]string{"--xpu-smi-timeout", "20s"}, "--collection-stuck-after 1m0s is shorter than a working collection may take: give at least 1m5s"},
		{[]string{"--self-pod-name", "xpu-exporter-abcde"}, `--self-pod-name "xpu-exporter-abcde" and --self-pod-namespace "": give both or neither`},
		{[]string{"--config-file", "/nonexistent/config.yaml"}, "--config-file: reading the sharing configuration: open /nonexistent/config.yaml"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := run(t, context.Background(), tc.args...)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func freeAddress(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// get fetches url until the server answers (it starts in the background).
func get(t testing.TB, url, user, password string) (int, string) {
	t.Helper()
	var lastErr error
	for range 100 {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			lastErr = err
			time.Sleep(50 * time.Millisecond)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	t.Fatalf("GET %s: %v", url, lastErr)
	return 0, ""
}

// The exporter on a fake host, behind basic auth from --web.config.file:
// the fake xpu-smi's values are served at --web.telemetry-path.
func TestServeFakeHost(t *testing.T) {
	testreq.Root(t, "discovery stats real device nodes")
	tr := fakehosttest.Build(t, fakehost.P800x8())
	s := fakehost.DefaultTelemetry(tr)
	s.Devices[4].UsedMiB = 4321
	require.NoError(t, fakehost.WriteXPUSMIState(tr.Root, s))
	hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	require.NoError(t, err)
	webConfig := filepath.Join(t.TempDir(), "web.yml")
	require.NoError(t, os.WriteFile(webConfig, fmt.Appendf(nil, "basic_auth_users:\n  prom: %s\n", hash), 0o600))
	specs := t.TempDir()

	addr := freeAddress(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := run(t, ctx, "--host-root", tr.Root, "--xpu-smi-chroot=false", "--web.listen-address", addr,
			"--web.telemetry-path", "/xpu-metrics", "--web.config.file", webConfig, "--pod-resources-socket", "", "--cdi-spec-dir", specs)
		done <- err
	}()
	url := "http://" + addr + "/xpu-metrics"
	code, _ := get(t, url, "", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body := get(t, url, "prom", "secret")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, fmt.Sprintf(`xpu_memory_used_bytes{model="P800",pci_bus_id="%s",xpu="4"} 4.530896896e+09`, s.Devices[4].BusID))
	require.Contains(t, body, `xpu_exporter_source_up{source="xpu-smi"} 1`)
	require.Contains(t, body, `xpu_healthy{model="P800",pci_bus_id="`+s.Devices[0].BusID+`",xpu="0"} 0`, "no CDI spec names it")
	require.Contains(t, body, `xpu_health_info{model="P800",pci_bus_id="`+s.Devices[0].BusID+`",reason="no CDI spec of kind baidu.com/xpu names it",xpu="0"} 1`)
	require.Contains(t, body, "process_resident_memory_bytes")
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	require.NoError(t, err)
	require.Empty(t, problems, "promlint (promtool check metrics) on the whole scrape")
	code, body = get(t, "http://"+addr+"/", "prom", "secret")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "/xpu-metrics")
	cancel()
	require.NoError(t, <-done)
}

// exchange sends a GET of path on conn and reads the answer, within d.
func exchange(conn net.Conn, r *bufio.Reader, path string, d time.Duration) (*http.Response, error) {
	if err := conn.SetDeadline(time.Now().Add(d)); err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: exporter\r\n\r\n", path); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return resp, errors.Join(err, resp.Body.Close())
}

// The server holds at most --web.max-connections connections: with that
// many idle keep-alive connections open, another one is not served until
// the idle timeout closes them; a connection that sends nothing is closed
// at the header timeout. (Without the bounds, 4000 idle connections of one
// client took the exporter to 91 MiB, past the chart's 64 Mi limit.)
func TestServeBoundsConnections(t *testing.T) {
	addr := freeAddress(t)
	devRoot, driverRoot := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		log := logrus.New()
		log.SetOutput(io.Discard)
		app := newAppWith(log, &options{timeouts: serverTimeouts{readHeader: 500 * time.Millisecond, idle: time.Second}})
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		done <- app.RunContext(ctx, []string{
			"xpu-exporter", "--dev-root", devRoot, "--driver-root", driverRoot, "--xpu-smi", "none",
			"--pod-resources-socket", "", "--web.listen-address", addr, "--web.max-connections", "3",
		})
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	dial := func() (net.Conn, *bufio.Reader) {
		var conn net.Conn
		require.Eventually(t, func() bool {
			var err error
			conn, err = net.Dial("tcp", addr)
			return err == nil
		}, 5*time.Second, 20*time.Millisecond)
		t.Cleanup(func() { _ = conn.Close() })
		return conn, bufio.NewReader(conn)
	}

	// Three idle keep-alive connections, each served once.
	type held struct {
		conn net.Conn
		r    *bufio.Reader
	}
	var idle []held
	for range 3 {
		conn, r := dial()
		resp, err := exchange(conn, r, "/healthz", 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		idle = append(idle, held{conn, r})
	}
	start := time.Now()
	conn, r := dial()
	_, err := exchange(conn, r, "/healthz", 300*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "a fourth connection is not served while three are held")
	require.True(t, ne.Timeout(), "%v", err)

	// The idle timeout closes the three; then the fourth is served.
	for _, h := range idle {
		require.NoError(t, h.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err := h.r.ReadByte()
		require.ErrorIs(t, err, io.EOF, "the server closes an idle connection")
	}
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, conn.Close())

	// A connection that sends nothing is closed at the header timeout.
	silent, sr := dial()
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(5*time.Second)))
	begin := time.Now()
	_, err = sr.ReadByte()
	require.ErrorIs(t, err, io.EOF)
	require.Less(t, time.Since(begin), 3*time.Second)
}

// GET /healthz answers 503 while a collection has run past its stuck bound
// (the chart's liveness probe restarts the exporter then), and ok again
// once it ends. The xpu-smi here sleeps for 3 s, which stands for one in
// uninterruptible sleep that no signal ends: the collection outlives the
// stuck bound, as such a child's does.
func TestHealthzFailsWhileStuck(t *testing.T) {
	tr := fakehosttest.Build(t, fakehost.P800x8())
	prog := filepath.Join(t.TempDir(), "xpu-smi")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\nsleep 3\n"), 0o755))
	c := exporter.New(exporter.Config{
		Discover: func() (*discover.Host, error) { return discover.Discover(tr.DiscoverOptions()...) },
		DevRoot:  tr.Root, XPUSMIPath: prog, XPUSMI: xpusmi.Config{Timeout: 10 * time.Second},
		Wait: 100 * time.Millisecond, StuckAfter: 500 * time.Millisecond,
	})
	o := &options{telemetryPath: "/metrics"}
	h, err := o.handler(c)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	health := func() (int, string) {
		resp, err := http.Get(srv.URL + "/healthz")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, errors.Join(err, resp.Body.Close()))
		return resp.StatusCode, string(body)
	}
	code, body := health()
	require.Equal(t, http.StatusOK, code, body)
	start := time.Now()
	code, body = get(t, srv.URL+"/metrics", "", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "xpu_exporter_collection_stale 1")
	require.Less(t, time.Since(start), 2*time.Second, "the scrape does not wait for xpu-smi")
	require.Eventually(t, func() bool { code, _ := health(); return code == http.StatusServiceUnavailable }, 2*time.Second, 50*time.Millisecond)
	_, body = health()
	require.Contains(t, body, "collection stuck: a collection has run for")
	require.Eventually(t, func() bool { code, _ := health(); return code == http.StatusOK }, 10*time.Second, 100*time.Millisecond, "ok once xpu-smi ends")
}
