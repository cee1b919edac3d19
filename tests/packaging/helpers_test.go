package packaging

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// builtPackages are the outputs of one "make deb rpm" shared by all tests.
type builtPackages struct {
	deb, rpm string // package files
	stage    string // packaging/stage.sh output the packages were built from
	version  string // package version, from the .deb's name
	err      error
	log      string
}

// buildCache holds one "make deb rpm" per architecture.
type buildCache struct {
	once  sync.Once
	built builtPackages
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*buildCache{}
	buildDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// requireRoot is testreq.Root for what every packaging test does.
func requireRoot(t *testing.T) {
	t.Helper()
	testreq.Root(t, "installs and removes packages")
}

// requireTools is testreq.Tool for each of the tools: skips on a laptop,
// fails under CI=true.
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		testreq.Tool(t, tool)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	root, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
	require.NoError(t, err)
	return root
}

// run runs a command and returns its combined output, failing the test on error.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(env, name, args...)
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return out
}

func runErr(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	err := cmd.Run()
	return buf.String(), err
}

// packages builds the .deb and the .rpm of the host's architecture once
// with the make targets.
func packages(t *testing.T) builtPackages { return packagesFor(t, runtime.GOARCH) }

// packagesFor builds the .deb and the .rpm for a Go architecture once with
// the make targets (GOARCH=arm64 on an amd64 host: a cross build).
func packagesFor(t *testing.T, goarch string) builtPackages {
	t.Helper()
	requireRoot(t)
	requireTools(t, "make", "go", "dpkg-buildpackage", "dh", "lintian", "rpmbuild", "rpmlint", "help2man")
	root := repoRoot(t)
	buildsMu.Lock()
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "xpu-cdi-packaging-test-")
		if err != nil {
			buildsMu.Unlock()
			require.NoError(t, err)
		}
		buildDir = dir
	}
	c, ok := builds[goarch]
	if !ok {
		c = &buildCache{}
		builds[goarch] = c
	}
	buildsMu.Unlock()
	c.once.Do(func() {
		built := &c.built
		built.stage = filepath.Join(buildDir, goarch, "stage")
		dist := filepath.Join(buildDir, goarch, "dist")
		cmd := exec.Command("make", "-f", "packaging/packaging.mk", "deb", "rpm",
			"DIST="+dist, "PKG_STAGE="+built.stage, "GOARCH="+goarch)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		built.log = string(out)
		if err != nil {
			built.err = err
			return
		}
		debs, _ := filepath.Glob(filepath.Join(dist, "xpu-cdi_*_*.deb"))
		rpms, _ := filepath.Glob(filepath.Join(dist, "xpu-cdi-*-1.*.rpm"))
		if len(debs) != 1 || len(rpms) != 1 {
			built.err = fmt.Errorf("want one .deb and one .rpm in %s, got %q and %q", dist, debs, rpms)
			return
		}
		built.deb, built.rpm = debs[0], rpms[0]
		// xpu-cdi_<version>_<arch>.deb
		built.version = strings.Split(filepath.Base(built.deb), "_")[1]
	})
	require.NoError(t, c.built.err, "make deb rpm GOARCH=%s:\n%s", goarch, c.built.log)
	return c.built
}

// stagedBinaries lists the binaries the packages contain.
func stagedBinaries(t *testing.T, p builtPackages) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(p.stage, "bin"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Contains(t, names, "xpu-cdi")
	for _, want := range []string{"xpu-runtime-hook", "xpu-container-runtime", "xpu-device-plugin"} {
		if _, err := os.Stat(filepath.Join(repoRoot(t), "cmd", want)); err == nil {
			matches, _ := filepath.Glob(filepath.Join(repoRoot(t), "cmd", want, "*.go"))
			if len(matches) > 0 {
				require.Contains(t, names, want, "cmd/%s exists but is not packaged", want)
			}
		}
	}
	return names
}

// fakeHost builds a fake P800x8 Kunlun host tree with the project's fake host builder.
func fakeHost(t *testing.T, extra ...string) string {
	t.Helper()
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "internal", "cmd", "xpu-fakehost")); err != nil {
		testreq.Missing(t, "internal/cmd/xpu-fakehost is missing: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "host")
	args := append([]string{"run", "./internal/cmd/xpu-fakehost", "--shape", "p800x8", "--root", dir}, extra...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "xpu-fakehost:\n%s", out)
	return dir
}

// fileList returns every path under the given roots (not following symlinks),
// leaving out what other programs change while the test runs.
func fileList(t *testing.T, roots ...string) []string {
	t.Helper()
	var list []string
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			// Python byte code written by rpmlint and lintian helpers on first use.
			if d.IsDir() && d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			// CDI specs of unique test vendors that tests of other packages
			// (and benchmarks) write while this one runs.
			if isTestSpec(path) {
				return nil
			}
			list = append(list, path)
			return nil
		})
		require.NoError(t, err)
	}
	sort.Strings(list)
	return list
}

// isTestSpec reports whether path is a spec (or its temporary file) of a
// unique test vendor in the host CDI directory.
func isTestSpec(path string) bool {
	return filepath.Dir(path) == harness.HostCDIDir &&
		(strings.Contains(path, harness.TestVendorDomain) || strings.HasPrefix(filepath.Base(path), ".e2e-spec-"))
}

// diff returns the entries only in a and only in b.
func diff(a, b []string) (onlyA, onlyB []string) {
	inA := make(map[string]bool, len(a))
	for _, x := range a {
		inA[x] = true
	}
	inB := make(map[string]bool, len(b))
	for _, x := range b {
		inB[x] = true
		if !inA[x] {
			onlyB = append(onlyB, x)
		}
	}
	for _, x := range a {
		if !inB[x] {
			onlyA = append(onlyA, x)
		}
	}
	return onlyA, onlyB
}
