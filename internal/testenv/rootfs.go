package testenv

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// HostBusybox is the statically linked busybox of Debian's busybox-static.
const HostBusybox = "/bin/busybox"

// The image's account files: root and nobody, no passwords (x).
const (
	etcPasswd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" //nolint:gosec // G101: an account file without passwords, not a credential
	etcGroup  = "root:x:0:\nnogroup:x:65534:\n"
)

// baseImageLibs are the libraries of a typical glibc base image (what
// debian:bookworm-slim ships in /lib/x86_64-linux-gnu).
var baseImageLibs = []string{
	"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libresolv.so.2",
	"libnss_files.so.2", "libnss_dns.so.2", "libanl.so.1", "libutil.so.1", "libgcc_s.so.1",
	"libstdc++.so.6", "libz.so.1", "libtinfo.so.6", "libselinux.so.1", "libpcre2-8.so.0",
	"libacl.so.1", "libattr.so.1", "libcrypt.so.1", "libmd.so.0", "libbz2.so.1.0", "liblzma.so.5",
	"libzstd.so.1", "libaudit.so.1", "libcap-ng.so.0", "libcap.so.2", "libpam.so.0", "libsemanage.so.2",
	"libsepol.so.2", "libdb-5.3.so", "libgmp.so.10", "libhogweed.so.6", "libnettle.so.8",
	"libgnutls.so.30", "libp11-kit.so.0", "libtasn1.so.6", "libunistring.so.2", "libidn2.so.0",
	"libffi.so.8", "libsystemd.so.0", "libudev.so.1", "liblz4.so.1", "libgcrypt.so.20",
	"libgpg-error.so.0", "libsmartcols.so.1", "libuuid.so.1", "libblkid.so.1", "libmount.so.1",
	"libext2fs.so.2", "libcom_err.so.2", "libss.so.2", "libe2p.so.2", "libxxhash.so.0", "libdebconfclient.so.0",
}

// BuildBusyboxRootfs fills dir with a minimal root filesystem: the host's
// static busybox (HostBusybox) as /bin/busybox with a symlink for every
// applet, /etc/passwd, /etc/group, an empty /tmp (1777) and empty /dev,
// /proc, /sys, /run, /root and /var. It has no dynamic loader, no libc and
// no ldconfig.
func BuildBusyboxRootfs(dir string) error {
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "dev", "proc", "sys", "run", "root", "var", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("creating %s in %s: %w", d, dir, err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("chmod %s/tmp: %w", dir, err)
	}
	if err := copyFile(HostBusybox, filepath.Join(dir, "bin/busybox"), 0o755); err != nil {
		return err
	}
	out, err := exec.Command(HostBusybox, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("%s --list-full: %w (install busybox-static)", HostBusybox, err)
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
		if err := os.Symlink("/bin/busybox", link); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("linking applet %s: %w", applet, err)
		}
	}
	for _, f := range []struct{ name, data string }{{"etc/passwd", etcPasswd}, {"etc/group", etcGroup}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.data), 0o644); err != nil {
			return fmt.Errorf("writing %s in %s: %w", f.name, dir, err)
		}
	}
	return nil
}

// BuildGlibcRootfs builds the root of BuildBusyboxRootfs and adds the host's
// dynamic loader and libc.so.6 at their host paths, plus extraLibs (sonames
// such as "libm.so.6", found in the directory of the host's libc, or
// absolute host paths), so that dynamically linked programs built on the
// host run inside. Every library must exist. It writes no /sbin/ldconfig and
// no /etc/ld.so.cache (see WriteLDCache): the loader finds the libraries in
// its default directories.
func BuildGlibcRootfs(dir string, extraLibs ...string) error {
	if err := BuildBusyboxRootfs(dir); err != nil {
		return err
	}
	loader, libc, err := HostGlibc()
	if err != nil {
		return err
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
			return fmt.Errorf("adding %s to %s: %w", lib, dir, err)
		}
	}
	return nil
}

// AddBaseImageLibs copies into the root dir, at their host paths, those of
// the libraries of a typical glibc base image (what debian:bookworm-slim
// ships) that the host has in the directory of its libc and that dir does
// not have yet, so that an ld.so.cache built for dir has a realistic size.
func AddBaseImageLibs(dir string) error {
	_, libc, err := HostGlibc()
	if err != nil {
		return err
	}
	libDir := filepath.Dir(libc)
	for _, name := range baseImageLibs {
		p := filepath.Join(libDir, name)
		if _, err := os.Stat(p); err != nil {
			continue // not on this host
		}
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			continue // already in the root (libc.so.6 from BuildGlibcRootfs)
		}
		if err := CopyIntoRootfs(dir, p, p); err != nil {
			return fmt.Errorf("adding %s to %s: %w", p, dir, err)
		}
	}
	return nil
}

// WriteLDCache writes /etc/ld.so.conf (including /etc/ld.so.conf.d/*.conf,
// an empty directory) in the root dir, builds /etc/ld.so.cache for dir with
// the host's ldconfig -r and returns the bytes of that cache.
func WriteLDCache(dir string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Join(dir, "etc/ld.so.conf.d"), 0o755); err != nil {
		return nil, fmt.Errorf("creating ld.so.conf.d in %s: %w", dir, err)
	}
	conf := "include /etc/ld.so.conf.d/*.conf\n"
	if err := os.WriteFile(filepath.Join(dir, "etc/ld.so.conf"), []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("writing ld.so.conf in %s: %w", dir, err)
	}
	ldconfig, err := hostLdconfig()
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command(ldconfig, "-r", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s -r %s: %w: %s", ldconfig, dir, err, bytes.TrimSpace(out))
	}
	cachePath := filepath.Join(dir, "etc/ld.so.cache")
	cache, err := os.ReadFile(cachePath)
	if err != nil {
		return nil, fmt.Errorf("reading the image's ld.so.cache %s: %w", cachePath, err)
	}
	return cache, nil
}

// hostLdconfig finds the host's ldconfig on PATH or in the system
// directories, where Debian keeps it (/sbin is not on every user's PATH).
func hostLdconfig() (string, error) {
	if p, err := exec.LookPath("ldconfig"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/ldconfig", "/sbin/ldconfig", "/usr/bin/ldconfig", "/bin/ldconfig"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("ldconfig not found on PATH nor in /usr/sbin or /sbin: install libc-bin")
}

// HostGlibc returns the host's dynamic loader (the PT_INTERP of /bin/sh)
// and the libc.so.6 it resolves.
func HostGlibc() (loader, libc string, err error) {
	const probe = "/bin/sh"
	f, err := elf.Open(probe)
	if err != nil {
		return "", "", fmt.Errorf("opening %s: %w", probe, err)
	}
	defer func() { _ = f.Close() }() // read-only
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
// containerPath inside the root dir, keeping its permission bits and
// creating parent directories. It never overwrites: a file or symlink
// already at containerPath is an error.
func CopyIntoRootfs(dir, hostPath, containerPath string) error {
	return CopyFile(hostPath, filepath.Join(dir, filepath.Clean("/"+containerPath)))
}

// CopyFile copies the file src (following symlinks) to dst with the
// permission bits of src, creating the parent directories of dst. It never
// overwrites: a file or symlink already at dst is an error.
func CopyFile(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	return copyFile(src, dst, fi.Mode().Perm())
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

// Tar writes the root dir as an uncompressed tar archive at tarPath, with
// entries relative to the root and owned by root (0:0).
func Tar(dir, tarPath string) error {
	out, err := exec.Command("tar", "--numeric-owner", "--owner=0", "--group=0",
		"-C", dir, "-cf", tarPath, ".").CombinedOutput()
	if err != nil {
		return fmt.Errorf("tar -C %s -cf %s: %w: %s", dir, tarPath, err, out)
	}
	return nil
}
