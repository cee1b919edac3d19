package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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
// internal/cmd/<name>, the development tools) built for this machine.
func Binary(t testing.TB, name string) string {
	t.Helper()
	return binaryFor(t, name, runtime.GOARCH)
}

// binaryFor returns the path of the command cmd/<name> (else
// internal/cmd/<name>) built for linux/goarch by hack/gobuild.sh, the
// recipe of the shipped binaries (static, unstamped here), once per test
// binary. The directory is world-readable so runtimes can execute the hook
// and the shim.
func binaryFor(t testing.TB, name, goarch string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if binDir == "" {
		dir, err := os.MkdirTemp("", "xpu-cdi-e2e-bin-")
		require.NoError(t, err)
		require.NoError(t, os.Chmod(dir, 0o755))
		binDir = dir
	}
	key := name
	if goarch != runtime.GOARCH {
		key = name + "-linux-" + goarch
	}
	p := filepath.Join(binDir, key)
	if !binBuilt[key] {
		root := moduleRoot(t)
		pkg := "./cmd/" + name
		if _, err := os.Stat(filepath.Join(root, "cmd", name)); err != nil {
			pkg = "./internal/cmd/" + name
		}
		cmd := exec.Command(filepath.Join(root, "hack", "gobuild.sh"), goarch, p, pkg)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "VERSION=") })
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "building %s for linux/%s: %s", name, goarch, out)
		binBuilt[key] = true
	}
	return p
}

// shippedBinaries are the binaries of cmd/binaries.txt that ship in where
// ("pkg" or "image").
func shippedBinaries(t testing.TB, where string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "cmd", "binaries.txt"))
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && !strings.HasPrefix(f[0], "#") && slices.Contains(strings.Split(f[1], ","), where) {
			out = append(out, f[0])
		}
	}
	require.NotEmpty(t, out, "cmd/binaries.txt names no binary of %s", where)
	return out
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
