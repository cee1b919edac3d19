package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
)

// HostBusybox is the statically linked busybox of Debian's busybox-static.
const HostBusybox = testenv.HostBusybox

// BuildBusyboxRootfs fills dir with a minimal root filesystem: the host's
// static busybox as /bin/busybox with a symlink for every applet, /etc/passwd,
// /etc/group, and empty /tmp (1777), /dev, /proc, /sys, /run, /root. It has no
// dynamic loader, no libc and no ldconfig.
func BuildBusyboxRootfs(t testing.TB, dir string) {
	t.Helper()
	RequiresTool(t, HostBusybox)
	if err := testenv.BuildBusyboxRootfs(dir); err != nil {
		t.Fatalf("building busybox rootfs in %s: %v", dir, err)
	}
}

// BuildGlibcRootfs builds the busybox rootfs of BuildBusyboxRootfs and adds
// the host's dynamic loader and libc.so.6 at their host paths, plus
// extraLibs (sonames such as "libm.so.6", found where the host's libc is, or
// absolute host paths), so dynamically linked test programs built on the host
// run inside. It deliberately has no /sbin/ldconfig and no /etc/ld.so.cache:
// the loader finds libraries in its default directories.
func BuildGlibcRootfs(t testing.TB, dir string, extraLibs ...string) {
	t.Helper()
	RequiresTool(t, HostBusybox)
	if err := testenv.BuildGlibcRootfs(dir, extraLibs...); err != nil {
		t.Fatalf("building glibc rootfs in %s: %v", dir, err)
	}
	for _, f := range []string{"sbin/ldconfig", "etc/ld.so.cache"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			t.Fatalf("glibc rootfs %s unexpectedly has /%s", dir, f)
		}
	}
}

// CopyIntoRootfs copies the host file hostPath (following symlinks) to
// containerPath inside the rootfs dir, keeping its permission bits and
// creating parent directories.
func CopyIntoRootfs(dir, hostPath, containerPath string) error {
	return testenv.CopyIntoRootfs(dir, hostPath, containerPath)
}

// TarRootfs writes the rootfs dir as an uncompressed tar archive to
// tarPath (entries relative to the root, owned by root).
func TarRootfs(t testing.TB, dir, tarPath string) {
	t.Helper()
	if err := tarDir(dir, tarPath); err != nil {
		t.Fatalf("archiving %s: %v", dir, err)
	}
}

func tarDir(dir, tarPath string) error { return testenv.Tar(dir, tarPath) }
