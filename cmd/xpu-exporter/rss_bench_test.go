package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// BenchmarkExporterRSS runs the exporter binary, built as shipped (static,
// stripped), on a fake 8-XPU P800 host and scrapes it b.N times; it
// reports the process's peak resident memory (VmHWM, "MB-peak-rss"; the
// target is under 30 MB) and its resident memory after the scrapes
// ("MB-rss").
func BenchmarkExporterRSS(b *testing.B) {
	testreq.Root(b, "discovery stats real device nodes")
	gobin := testreq.Tool(b, "go")
	bin := filepath.Join(b.TempDir(), "xpu-exporter")
	build := exec.Command(gobin, "build", "-trimpath", "-tags", "urfave_cli_no_docs", "-ldflags", "-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(b, err, "%s", out)
	tr := fakehosttest.Build(b, fakehost.P800x8())

	addr := freeAddress(b)
	// Every scrape collects, as before scrapes shared collections.
	cmd := exec.Command(bin, "--host-root", tr.Root, "--xpu-smi-chroot=false", "--web.listen-address", addr, "--pod-resources-socket", "", "--cdi-spec-dir", b.TempDir(), "--min-collection-interval", "0")
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	code, body := get(b, "http://"+addr+"/metrics", "", "")
	require.Equal(b, 200, code)
	require.Contains(b, body, `xpu_exporter_source_up{source="xpu-smi"} 1`)
	b.ResetTimer()
	for range b.N {
		if code, _ := get(b, "http://"+addr+"/metrics", "", ""); code != 200 {
			b.Fatalf("scrape: %d", code)
		}
	}
	b.StopTimer()
	status := procStatus(b, cmd.Process.Pid)
	b.ReportMetric(status["VmHWM"]/1024, "MB-peak-rss")
	b.ReportMetric(status["VmRSS"]/1024, "MB-rss")
}

// procStatus returns the kB fields of /proc/PID/status.
func procStatus(b *testing.B, pid int) map[string]float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	defer func() { _ = f.Close() }()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64); ok && err == nil {
			out[k] = n
		}
	}
	return out
}
