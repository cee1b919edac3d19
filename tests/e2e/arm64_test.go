package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// The aarch64 user space the tests use, from Debian's qemu-user-static and
// libc6:arm64 (hack/install-deps.sh, group arm64).
const (
	qemuAarch64   = "/usr/bin/qemu-aarch64-static"
	aarch64Loader = "/lib/ld-linux-aarch64.so.1" // PT_INTERP of aarch64 glibc programs
	aarch64Libc   = "/lib/aarch64-linux-gnu/libc.so.6"
)

// requiresAarch64 checks for the aarch64 tools and C library.
func requiresAarch64(t *testing.T) {
	t.Helper()
	harness.RequiresRoot(t)
	harness.RequiresTool(t, qemuAarch64)
	harness.RequiresTool(t, "aarch64-linux-gnu-gcc")
	harness.RequiresTool(t, aarch64Loader) // libc6:arm64
	harness.RequiresTool(t, aarch64Libc)
}

// aarch64Rootfs is an aarch64 glibc root: Debian's arm64 loader and libc,
// an empty /etc (no loader cache), the fake XRE's aarch64 libxpurt.so.1
// where the CDI spec of the aarch64 host mounts it, and xpu-test (aarch64,
// linked against libxpurt.so.1) in /usr/bin.
func aarch64Rootfs(t *testing.T, tree *fakehost.Tree) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	root := filepath.Join(dir, "rootfs")
	for _, p := range []string{aarch64Loader, aarch64Libc} {
		require.NoError(t, testenv.CopyIntoRootfs(root, p, p))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	require.NoError(t, fakehost.BuildTestProgram(filepath.Join(root, "usr/bin/xpu-test"),
		fakehost.WithArch("arm64"), fakehost.WithCacheDir(fakehosttest.CacheDir(t))))
	require.NoError(t, testenv.CopyIntoRootfs(root, tree.Path(tree.XREDir+"/lib64/libxpurt.so.1"), "/usr/local/xpu/lib64/libxpurt.so.1"))
	return root
}

// runHook runs a hook subcommand on the bundle whose rootfs is root, as a
// runtime would: the OCI state on stdin.
func runHook(t *testing.T, hook []string, root string, args ...string) string {
	t.Helper()
	bundle := filepath.Dir(root)
	require.NoError(t, os.WriteFile(filepath.Join(bundle, "config.json"),
		[]byte(`{"ociVersion":"1.0.2","root":{"path":"`+filepath.Base(root)+`"}}`), 0o644))
	state, err := json.Marshal(map[string]any{"ociVersion": "1.0.2", "id": "arm64", "status": "creating", "pid": os.Getpid(), "bundle": bundle})
	require.NoError(t, err)
	cmd := exec.Command(hook[0], append(hook[1:], args...)...)
	cmd.Stdin = bytes.NewReader(state)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%v %v: %s", hook, args, out)
	return string(out)
}

// runChrooted runs the aarch64 program in root through a copy of the static
// qemu-aarch64 inside it: the loader then reads root's /etc/ld.so.cache and
// nothing of the host's (qemu's -L would fall back to host files).
func runChrooted(t *testing.T, root string, argv ...string) (string, error) {
	t.Helper()
	q := "/usr/bin/qemu-aarch64-static"
	if _, err := os.Stat(filepath.Join(root, q)); errors.Is(err, fs.ErrNotExist) {
		require.NoError(t, testenv.CopyIntoRootfs(root, qemuAarch64, q))
	}
	cmd := exec.Command("chroot", append([]string{root, q}, argv...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"} // no LD_PRELOAD, no LD_LIBRARY_PATH
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestArm64HookLoaderCache proves the aarch64 loader cache of the arm64
// hook with a real aarch64 loader: the arm64 xpu-runtime-hook (run by
// qemu-aarch64) writes the root's /etc/ld.so.cache from the aarch64 XRE
// folder, with the aarch64 flags (0x0a03); the aarch64 xpu-test program
// then loads libxpurt.so.1 without LD_PRELOAD or LD_LIBRARY_PATH. Without
// the hook, and with the same entry under x86-64's flags (0x0303, which the
// aarch64 loader silently skips), it does not.
func TestArm64HookLoaderCache(t *testing.T) {
	requiresAarch64(t)
	tree := FakeHost(t, fakehost.R200Arm64())
	root := aarch64Rootfs(t, tree)
	hook := []string{qemuAarch64, binaryFor(t, "xpu-runtime-hook", "arm64")}

	out, err := runChrooted(t, root, "/usr/bin/xpu-test")
	require.Error(t, err, "without the hook the library must not load:\n%s", out)
	require.Contains(t, out, "libxpurt.so.1")

	t.Logf("hook: %s", runHook(t, hook, root, "setup-libraries", "--folder", "/usr/local/xpu/lib64",
		"--link", "libxpurt.so.1::/usr/local/xpu/lib64/libxpurt.so"))
	data, err := os.ReadFile(filepath.Join(root, "etc/ld.so.cache"))
	require.NoError(t, err)
	entries, err := ldcache.Parse(data)
	require.NoError(t, err)
	require.Contains(t, entries, ldcache.Entry{Name: "libxpurt.so.1", Path: "/usr/local/xpu/lib64/libxpurt.so.1", Flags: 0x0a03})

	out, err = runChrooted(t, root, "/usr/bin/xpu-test")
	require.NoError(t, err, "with the hook's cache the aarch64 loader must find libxpurt.so.1:\n%s", out)
	require.Contains(t, out, "xpurt version: "+fakehost.DriverVersionKunlun2)

	// The same entry with x86-64's flags: the aarch64 loader skips it, so a
	// wrong flag cannot pass this test.
	x8664 := ldcache.Entry{Name: "libxpurt.so.1", Path: "/usr/local/xpu/lib64/libxpurt.so.1", Flags: ldcache.FlagELFLibc6 | ldcache.FlagX8664Lib64}
	wrong, err := ldcache.Encode([]ldcache.Entry{x8664})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/ld.so.cache"), wrong, 0o644))
	out, err = runChrooted(t, root, "/usr/bin/xpu-test")
	require.Error(t, err, "an x86-64-flagged entry must not serve the aarch64 loader:\n%s", out)
	require.Contains(t, out, "libxpurt.so.1")
}

// binfmtDir is where binfmt_misc is mounted.
const binfmtDir = "/proc/sys/fs/binfmt_misc"

// aarch64Magic is the ELF header prefix of aarch64 executables as
// binfmt_misc lists it (with qemu-user-static's mask).
const aarch64Magic = "7f454c460201010000000000000000000200b700"

// requiresAarch64Binfmt makes the kernel run aarch64 executables through
// qemu-aarch64-static, so that runc can start the arm64 hook and the
// container's aarch64 program: an enabled aarch64 handler already
// registered is used as it is; otherwise binfmt_misc is mounted if it is
// not, and a handler with the F flag (the interpreter opened now, so it
// works inside containers' mount namespaces) is registered. What the test
// registered or mounted is removed at its end.
func requiresAarch64Binfmt(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(binfmtDir, "register")); errors.Is(err, fs.ErrNotExist) {
		if err := unix.Mount("binfmt_misc", binfmtDir, "binfmt_misc", 0, ""); err != nil {
			testreq.Missing(t, "binfmt_misc cannot be mounted on %s here (%v): the Podman part needs it", binfmtDir, err)
		}
		t.Cleanup(func() { _ = unix.Unmount(binfmtDir, 0) })
	}
	entries, err := os.ReadDir(binfmtDir)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(binfmtDir, e.Name()))
		if err != nil || e.Name() == "register" || e.Name() == "status" {
			continue
		}
		if strings.Contains(string(data), "enabled\n") && strings.Contains(string(data), "magic "+aarch64Magic) {
			t.Logf("using the registered aarch64 binfmt handler %s", e.Name())
			return
		}
	}
	const name = "xpu-cdi-e2e-aarch64"
	rule := fmt.Sprintf(":%s:M::%s:%s:%s:F", name,
		`\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00`,
		`\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff`, qemuAarch64)
	require.NoError(t, os.WriteFile(filepath.Join(binfmtDir, "register"), []byte(rule), 0o200), "registering %s", rule)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(binfmtDir, name), []byte("-1"), 0o200) })
}

// TestArm64PodmanCDI starts the aarch64 root in real Podman with
// --device <vendor>/xpu=0 from the spec that the arm64 xpu-cdi (run by
// qemu-aarch64, so with its own default architecture) generates on the
// aarch64 fake host; the spec names the arm64 hook, which runc starts
// (binfmt_misc hands it to qemu-aarch64) and which writes the container's
// loader cache: the aarch64 xpu-test runs and sees the device. Without the
// device the library does not load.
func TestArm64PodmanCDI(t *testing.T) {
	requiresAarch64(t)
	requiresAarch64Binfmt(t)
	tree := FakeHost(t, fakehost.R200Arm64())
	root := aarch64Rootfs(t, tree)
	vendor := harness.UniqueVendor(t)
	hook := binaryFor(t, "xpu-runtime-hook", "arm64")

	cmd := exec.Command(qemuAarch64, binaryFor(t, "xpu-cdi", "arm64"), "generate", "--dev-root", tree.Root,
		"--driver-root", tree.Root, "--vendor", vendor, "--hook-path", hook)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	spec, err := cmd.Output()
	require.NoError(t, err, "arm64 xpu-cdi generate: %s", stderr.String())
	require.NotContains(t, stderr.String(), "level=warning", "the arm64 xpu-cdi must take the aarch64 host's libraries")
	require.Contains(t, string(spec), "path: "+hook)
	require.Contains(t, string(spec), "/usr/local/xpu/lib64/libxpurt.so.1")

	p := harness.NewPodman(t)
	image := p.ImportImage(t, root, "xpu-e2e-aarch64")
	p.InstallSpec(t, spec, vendor)
	r := p.MustRun(t, "run", "--rm", "--device", vendor+"/xpu=0", image, "/usr/bin/xpu-test")
	require.Contains(t, r.Stdout, "xpu devices: 1")
	require.Contains(t, r.Stdout, "xpurt version: "+fakehost.DriverVersionKunlun2)

	r = p.Run(t, "run", "--rm", image, "/usr/bin/xpu-test")
	require.NotZero(t, r.ExitCode, "without the device and its hook the library must not load: %s", r)
	require.Contains(t, r.Stdout+r.Stderr, "libxpurt.so.1")
}
