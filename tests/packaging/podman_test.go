package packaging

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// installMarker is written just before these tests install the package
// and removed once they have purged it. When a run is killed between the
// two (a test binary's timeout runs no cleanups), the next run finds the
// marker and purges the leftover instead of failing on it; an installation
// without the marker is someone else's and is never touched.
const installMarker = "/var/lib/xpu-cdi-tests/deb-installed"

// claimDebHost fails the test when xpu-cdi is installed on this host by
// anyone but an interrupted run of these tests, whose leftover it purges.
func claimDebHost(t *testing.T) {
	t.Helper()
	requireTools(t, "dpkg", "dpkg-query")
	out, err := runErr(nil, "dpkg-query", "-W", "-f=${Status} ${Version}", "xpu-cdi")
	if err != nil || !strings.Contains(out, "installed") && !strings.Contains(out, "config-files") {
		return
	}
	if _, err := os.Lstat(installMarker); err != nil {
		t.Fatalf("xpu-cdi is already installed on this host (%s) and %s does not say these tests installed it: "+
			"this test installs and purges the package; remove it first", out, installMarker)
	}
	t.Logf("purging xpu-cdi (%s) left installed by an interrupted run of these tests", out)
	run(t, nil, "dpkg", "--purge", "xpu-cdi")
	require.NoError(t, os.Remove(installMarker))
}

// dpkgInstall installs the .deb after writing installMarker, and registers
// a purge for the end of the test, whatever happens in between.
func dpkgInstall(t *testing.T, env []string, deb string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(installMarker), 0o755))
	require.NoError(t, os.WriteFile(installMarker, []byte(deb+"\n"), 0o644))
	t.Cleanup(func() {
		if _, err := runErr(nil, "dpkg", "--purge", "xpu-cdi"); err == nil {
			_ = os.Remove(installMarker)
		}
	})
	run(t, env, "dpkg", "-i", deb)
}

// installDeb installs the built .deb with dpkg -i and registers a purge for
// the end of the test, whatever happens in between. It refuses to run on a
// host where xpu-cdi is installed (but by an interrupted run of these tests)
// or where the default spec exists: the purge would remove someone's
// installation or spec. Tests of this package that install the package run
// one after the other (none calls t.Parallel), so two installs never overlap.
func installDeb(t *testing.T, p builtPackages, env []string) {
	t.Helper()
	claimDebHost(t)
	if _, err := os.Lstat(defaultSpec); err == nil {
		t.Fatalf("%s exists: purging the package would remove it; move it away first", defaultSpec)
	}
	dpkgInstall(t, env, p.deb)
}

// purgeDeb purges the package and checks that dpkg no longer knows it.
func purgeDeb(t *testing.T) {
	t.Helper()
	run(t, nil, "dpkg", "--purge", "xpu-cdi")
	out, _ := runErr(nil, "dpkg-query", "-W", "-f=${Status}", "xpu-cdi")
	require.NotContains(t, out, "installed", "xpu-cdi still known to dpkg after purge")
	require.NoError(t, os.Remove(installMarker))
}

// TestDebPodmanCDI installs the .deb, generates the spec for a fake Kunlun
// host with the installed `xpu-cdi refresh` (under a unique test vendor, in
// /var/run/cdi where Podman 4.3 reads it) and runs real Podman with
// `--device <vendor>/xpu=0`: the container gets the fake host's /dev/xpu0,
// and the installed /usr/bin/xpu-runtime-hook, which the spec names, runs
// (the libxpurt.so development link it makes is there). Purging the package
// leaves /usr, /etc, /var/run/cdi, /lib/systemd and /lib/udev as they were.
func TestDebPodmanCDI(t *testing.T) {
	p := packages(t)
	harness.RequiresTool(t, "podman")
	before := fileList(t, snapshotRoots...)
	host := fakeHost(t)
	require.FileExists(t, filepath.Join(host, "dev", "xpu0"))

	// No XPU_DEV_ROOT for dpkg: this host has no /dev/xpuctrl, so postinst
	// writes no spec.
	installDeb(t, p, nil)
	require.NoFileExists(t, defaultSpec, "postinst wrote a spec on a host without XPU")

	vendor := harness.UniqueVendor(t)
	spec := filepath.Join(harness.HostCDIDir, harness.SpecFileName(vendor))
	t.Cleanup(func() { _ = os.Remove(spec) })
	run(t, []string{"XPU_DEV_ROOT=" + host, "XPU_DRIVER_ROOT=" + host}, "/usr/bin/xpu-cdi", "refresh",
		"--vendor", vendor, "--output", spec)
	data, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.Contains(t, string(data), "/usr/bin/xpu-runtime-hook", "the spec must name the installed hook")
	require.Contains(t, string(data), "kind: "+vendor+"/xpu")

	pm := harness.NewPodman(t)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	image := pm.ImportImage(t, rootfs, "xpu-pkg-busybox")
	r := pm.MustRun(t, "run", "--rm", "--device", vendor+"/xpu=0", image, "sh", "-c",
		"ls /dev/xpu*; stat -c '%t:%T' /dev/xpu0; readlink /usr/local/xpu/lib64/libxpurt.so")
	hostNode, err := os.Stat(filepath.Join(host, "dev", "xpu0"))
	require.NoError(t, err)
	require.Equal(t, []string{"/dev/xpu0", "/dev/xpuctrl", majorMinorHex(t, hostNode), "libxpurt.so.1"},
		strings.Fields(r.Stdout), "the container must get exactly xpu0 (and the control node) and the hook's link")

	// Without the package's hook the link is not made: what the container
	// saw above is the hook's doing, not the image's.
	r = pm.MustRun(t, "run", "--rm", image, "sh", "-c", "ls /usr/local/xpu/lib64/libxpurt.so /dev/xpu0 2>&1; true")
	require.Contains(t, r.Stdout, "No such file")

	require.NoError(t, os.Remove(spec))
	purgeDeb(t)
	require.NoFileExists(t, "/usr/bin/xpu-runtime-hook")
	after := fileList(t, snapshotRoots...)
	gone, left := diff(before, after)
	// The test's own spec went to /var/run/cdi (the shared CDI directory on
	// tmpfs), which InstallSpec creates where it is missing; the spec itself
	// is removed above.
	left = without(left, harness.HostCDIDir)
	require.Empty(t, left, "left behind after purge")
	require.Empty(t, gone, "removed by install/purge but not ours")
}

// majorMinorHex is a device node's number as `stat -c '%t:%T'` prints it.
func majorMinorHex(t *testing.T, fi os.FileInfo) string {
	t.Helper()
	require.Equal(t, os.ModeCharDevice|os.ModeDevice, fi.Mode().Type(), "%s is not a char device", fi.Name())
	st, ok := fi.Sys().(*syscall.Stat_t)
	require.True(t, ok)
	rdev := uint64(st.Rdev) // Rdev is uint32 on some architectures.
	return fmt.Sprintf("%x:%x", unix.Major(rdev), unix.Minor(rdev))
}
