package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
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
		"xpu_exporter_source_up", "parent_pci_bus_id", "--config-file FILE", "[$XPU_CDI_CONFIG_FILE]",
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
