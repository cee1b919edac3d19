// Package fakehosttest builds fake Kunlun hosts (package fakehost) for
// tests and benchmarks: one shared ELF template cache for the whole run,
// a fresh temporary root per host, failures reported through testing.TB.
package fakehosttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// CacheDir returns the cache of compiled ELF templates shared by every test
// of a run. Compiling them takes about a second; the cache is keyed by the
// sources and the compiler and filled race-free, so sharing is safe.
func CacheDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "xpu-cdi-test-elf-cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("creating the fake host build cache: %v", err)
	}
	return dir
}

// Build builds h under a new temporary directory of t, with the shared
// cache. The directory is world-searchable so that container runtimes can
// bind-mount the tree's files.
func Build(t testing.TB, h fakehost.Host, opts ...fakehost.Option) *fakehost.Tree {
	t.Helper()
	return build(t, t.TempDir(), h, opts)
}

// BuildOnTmpfs is Build in a directory on /dev/shm where there is one:
// benchmarks build hosts with thousands of files, whose creation on a disk
// would dominate their set-up.
func BuildOnTmpfs(t testing.TB, h fakehost.Host, opts ...fakehost.Option) *fakehost.Tree {
	t.Helper()
	parent := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, "xpu-fakehost-")
	if err != nil {
		t.Fatalf("creating a directory for a fake host: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return build(t, dir, h, opts)
}

func build(t testing.TB, dir string, h fakehost.Host, opts []fakehost.Option) *fakehost.Tree {
	t.Helper()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("making %s searchable: %v", dir, err)
	}
	opts = append([]fakehost.Option{fakehost.WithCacheDir(CacheDir(t))}, opts...)
	tree, err := fakehost.Build(filepath.Join(dir, "host"), h, opts...)
	if err != nil {
		t.Fatalf("building the fake %s host: %v", h.Shape, err)
	}
	return tree
}

// WriteSpec writes into dir the spec xpu-cdi generate would write for
// tree (devices named by index, no hooks) and returns its path: the node
// spec the device plugin and the DRA driver check their devices against.
func WriteSpec(t testing.TB, tree *fakehost.Tree, dir string) string {
	t.Helper()
	h, err := discover.Discover(tree.DiscoverOptions()...)
	if err != nil {
		t.Fatalf("discovering the fake host: %v", err)
	}
	spec, _, err := cdispec.New(h, cdispec.Settings{NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex}, NoHooks: true})
	if err != nil {
		t.Fatalf("building the fake host's spec: %v", err)
	}
	path := filepath.Join(dir, "baidu.com-xpu.yaml")
	if err := cdispec.WriteFile(path, spec, cdispec.FormatYAML); err != nil {
		t.Fatalf("writing the fake host's spec: %v", err)
	}
	return path
}

// StartSRIOV starts the fake SR-IOV kernel (fakehost.StartSRIOV) on tree,
// a tree Build made, with opts; it logs to t unless opts say otherwise. It needs root
// and FUSE (testreq.FUSE: the test skips without them, fails under CI).
// The kernel is closed at t's cleanup, before the tree's directory is
// removed; a test binary killed before its cleanups (go test -timeout)
// leaves dead mounts, which the next StartSRIOV detaches.
func StartSRIOV(t testing.TB, tree *fakehost.Tree, opts fakehost.SRIOVOptions) *fakehost.SRIOVKernel {
	t.Helper()
	testreq.FUSE(t, "the fake SR-IOV kernel")
	if opts.Log == nil {
		opts.Log = t.Logf
	}
	k, err := fakehost.StartSRIOV(tree.Root, tree.Host, opts)
	if err != nil {
		t.Fatalf("starting the fake SR-IOV kernel: %v", err)
	}
	t.Cleanup(func() {
		if err := k.Close(); err != nil {
			t.Errorf("closing the fake SR-IOV kernel: %v", err)
		}
	})
	return k
}

// OutsideSecret is in every file LinkDirsOut writes outside the tree;
// OutsideResets is the reset count it writes there.
const (
	OutsideSecret = "s3cr3t-outside-the-root"
	OutsideResets = 4242
)

// LinkDirsOut makes two of the tree's driver directories symlinks that
// lead out of the root, as a hostile or broken dev root may have them:
// /proc/xpu -> ../../elsewhere (relative, climbing out) and
// /sys/module/kunlun -> an absolute directory outside. The directories they
// lead to hold 0600 files of the driver's shapes (version, devN/info,
// state, mminfo, reset_count) carrying OutsideSecret (OutsideResets in
// reset_count): nothing discovery, labels, slice attributes or the
// exporter publish may carry it. A tree with /proc/xpu (4.x, P800) keeps
// nothing of it in the root.
func LinkDirsOut(t testing.TB, tree *fakehost.Tree) {
	t.Helper()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("linking directories out of %s: %v", tree.Root, err)
		}
	}
	parent := filepath.Dir(tree.Root)
	elsewhere := filepath.Join(parent, "elsewhere")
	check(os.RemoveAll(tree.Path("/proc/xpu")))
	write := func(p, content string) {
		check(os.MkdirAll(filepath.Dir(p), 0o700))
		check(os.WriteFile(p, []byte(content), 0o600))
	}
	write(filepath.Join(elsewhere, "version"), OutsideSecret+"\n")
	for _, d := range tree.Devices {
		dir := filepath.Join(elsewhere, "dev"+strconv.Itoa(d.Index))
		write(filepath.Join(dir, "info"), fmt.Sprintf("DeviceName:\t%[1]s\nDeviceAddr:\t%[1]s\nDeviceSN:\t%[1]s\nDriverVersion:\t%[1]s\n", OutsideSecret))
		write(filepath.Join(dir, "state"), OutsideSecret+"\n")
		write(filepath.Join(dir, "mminfo"), "MAIN: 0 / 4242 MB\n")
		write(filepath.Join(dir, "reset_count"), strconv.Itoa(OutsideResets)+"\n")
	}
	check(os.MkdirAll(tree.Path("/proc"), 0o755))
	check(os.Symlink("../../elsewhere", tree.Path("/proc/xpu")))

	module := filepath.Join(parent, "elsewhere-module")
	write(filepath.Join(module, "version"), OutsideSecret+"\n")
	check(os.RemoveAll(tree.Path("/sys/module/kunlun")))
	check(os.MkdirAll(tree.Path("/sys/module"), 0o755))
	check(os.Symlink(module, tree.Path("/sys/module/kunlun")))
}
