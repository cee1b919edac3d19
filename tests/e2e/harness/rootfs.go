package harness

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// HostBusybox is the statically linked busybox of Debian's busybox-static.
const HostBusybox = "/bin/busybox"

const (
	etcPasswd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	etcGroup  = "root:x:0:\nnogroup:x:65534:\n"
)

// BuildBusyboxRootfs fills dir with a minimal root filesystem: the host's
// static busybox as /bin/busybox with a symlink for every applet, /etc/passwd,
// /etc/group, and empty /tmp (1777), /dev, /proc, /sys, /run, /root. It has no
// dynamic loader, no libc and no ldconfig.
func BuildBusyboxRootfs(t testing.TB, dir string) {
	t.Helper()
	RequiresTool(t, HostBusybox)
	if err := buildBusyboxRootfs(dir); err != nil {
		t.Fatalf("building busybox rootfs in %s: %v", dir, err)
	}
}

func buildBusyboxRootfs(dir string) error {
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "dev", "proc", "sys", "run", "root", "var", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("chmod tmp: %w", err)
	}
	if err := copyFile(HostBusybox, filepath.Join(dir, "bin/busybox"), 0o755); err != nil {
		return err
	}
	out, err := exec.Command(HostBusybox, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("%s --list-full: %w", HostBusybox, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		applet := strings.TrimSpace(sc.Text())
		if applet == "" || applet == "bin/busybox" || strings.Contains(applet, "..") {
			continue
		}
		link := filepath.Join(dir, applet)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(link), err)
		}
		if err := os.Symlink("/bin/busybox", link); err != nil && !os.IsExist(err) {
			return fmt.Errorf("linking applet %s: %w", applet, err)
		}
	}
	if err := writeFile(filepath.Join(dir, "etc/passwd"), []byte(etcPasswd)); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "etc/group"), []byte(etcGroup))
}

// BuildGlibcRootfs builds the busybox rootfs of BuildBusyboxRootfs and adds
// the host's dynamic loader and libc.so.6 at their host paths, plus
// extraLibs (sonames such as "libm.so.6", found where the host's libc is, or
// absolute host paths), so dynamically linked test programs built on the host
// run inside. It deliberately has no /sbin/ldconfig and no /etc/ld.so.cache:
// the loader finds libraries in its default directories.
func BuildGlibcRootfs(t testing.TB, dir string, extraLibs ...string) {
	t.Helper()
	BuildBusyboxRootfs(t, dir)
	loader, libc, err := hostGlibc()
	if err != nil {
		t.Fatalf("locating the host's glibc: %v", err)
	}
	libs := []string{loader, libc}
	for _, lib := range extraLibs {
		if !filepath.IsAbs(lib) {
			lib = filepath.Join(filepath.Dir(libc), lib)
		}
		libs = append(libs, lib)
	}
	for _, lib := range libs {
		if err := CopyIntoRootfs(dir, lib, lib); err != nil {
			t.Fatalf("adding %s to %s: %v", lib, dir, err)
		}
	}
	for _, f := range []string{"sbin/ldconfig", "etc/ld.so.cache"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			t.Fatalf("glibc rootfs %s unexpectedly has /%s", dir, f)
		}
	}
}

// hostGlibc returns the host's dynamic loader (the PT_INTERP of /bin/sh) and
// the libc.so.6 it resolves.
func hostGlibc() (loader, libc string, err error) {
	const probe = "/bin/sh"
	f, err := elf.Open(probe)
	if err != nil {
		return "", "", fmt.Errorf("opening %s: %w", probe, err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		data, err := io.ReadAll(p.Open())
		if err != nil {
			return "", "", fmt.Errorf("reading PT_INTERP of %s: %w", probe, err)
		}
		loader = strings.TrimRight(string(data), "\x00")
	}
	if loader == "" {
		return "", "", fmt.Errorf("%s has no PT_INTERP", probe)
	}
	out, err := exec.Command(loader, "--list", probe).Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --list %s: %w", loader, probe, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 3 && fields[0] == "libc.so.6" && fields[1] == "=>" {
			return loader, fields[2], nil
		}
	}
	return "", "", fmt.Errorf("libc.so.6 not in %s --list %s:\n%s", loader, probe, out)
}

// CopyIntoRootfs copies the host file hostPath (following symlinks) to
// containerPath inside the rootfs dir, keeping its permission bits and
// creating parent directories.
func CopyIntoRootfs(dir, hostPath, containerPath string) error {
	fi, err := os.Stat(hostPath)
	if err != nil {
		return fmt.Errorf("stat %s: %w", hostPath, err)
	}
	return copyFile(hostPath, filepath.Join(dir, filepath.Clean("/"+containerPath)), fi.Mode().Perm())
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("opening %s: %w", src, err)
	}
	defer func() { _ = in.Close() }() // read-only
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(dst), err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("creating %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", dst, err)
	}
	return nil
}

// TarRootfs writes the rootfs dir as an uncompressed tar archive to
// tarPath (entries relative to the root, owned by root).
func TarRootfs(t testing.TB, dir, tarPath string) {
	t.Helper()
	if err := tarDir(dir, tarPath); err != nil {
		t.Fatalf("archiving %s: %v", dir, err)
	}
}

func tarDir(dir, tarPath string) error {
	out, err := exec.Command("tar", "--numeric-owner", "--owner=0", "--group=0",
		"-C", dir, "-cf", tarPath, ".").CombinedOutput()
	if err != nil {
		return fmt.Errorf("tar -C %s -cf %s: %w: %s", dir, tarPath, err, out)
	}
	return nil
}
