package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// The project's binaries, each built once per test binary, static as shipped.
var (
	binMu    sync.Mutex
	binDir   string
	binBuilt = map[string]bool{}
)

// moduleRoot is the repository root (tests/e2e is two levels down).
func moduleRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// Binary returns the path of the command cmd/<name> (else
// internal/cmd/<name>, the development tools) built with CGO_ENABLED=0. The directory is world-readable so runtimes can execute the
// hook and the shim.
func Binary(t testing.TB, name string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if binDir == "" {
		dir, err := os.MkdirTemp("", "xpu-cdi-e2e-bin-")
		require.NoError(t, err)
		require.NoError(t, os.Chmod(dir, 0o755))
		binDir = dir
	}
	p := filepath.Join(binDir, name)
	if !binBuilt[name] {
		pkg := "./cmd/" + name
		if _, err := os.Stat(filepath.Join(moduleRoot(t), "cmd", name)); err != nil {
			pkg = "./internal/cmd/" + name
		}
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "urfave_cli_no_docs", "-o", p, pkg)
		cmd.Dir = moduleRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "building %s: %s", name, out)
		binBuilt[name] = true
	}
	return p
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// FakeHost builds a fake Kunlun host with real device nodes. The directory
// is world-searchable: runtimes bind-mount its files into containers.
func FakeHost(t testing.TB, h fakehost.Host) *fakehost.Tree {
	t.Helper()
	harness.RequiresRoot(t)
	tree := fakehosttest.Build(t, h)
	require.True(t, tree.RealNodes, "end-to-end tests need real char devices")
	return tree
}

// XPUCDI runs the xpu-cdi binary and returns its stdout; it fails the test
// on a non-zero exit.
func XPUCDI(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(Binary(t, "xpu-cdi"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "xpu-cdi %v: %s", args, stderr.String())
	return string(out)
}

// GenerateSpec runs `xpu-cdi generate` for a fake host under a test vendor.
func GenerateSpec(t testing.TB, tree *fakehost.Tree, vendor string, extra ...string) []byte {
	t.Helper()
	args := append([]string{
		"generate", "--dev-root", tree.Root, "--driver-root", tree.Root,
		"--vendor", vendor, "--hook-path", Binary(t, "xpu-runtime-hook"),
	}, extra...)
	return []byte(XPUCDI(t, args...))
}
