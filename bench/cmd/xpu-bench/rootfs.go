package main

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
)

const hostBusybox = "/bin/busybox"

// The image's account files: root and nobody, no passwords (x).
const (
	etcPasswd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" //nolint:gosec // G101: an account file without passwords, not a credential
	etcGroup  = "root:x:0:\nnogroup:x:65534:\n"
)

// glibcLibs are the libraries of a typical glibc base image (what
// debian:bookworm-slim ships in /lib/x86_64-linux-gnu), copied from the host
// where present, so the image's ld.so.cache has a realistic size.
var glibcLibs = []string{
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

// buildGlibcRootfs writes a glibc image root at dir: busybox (static) with
// its applets, the host's loader and the libraries above in the host's libc
// directory, /etc/ld.so.conf and an /etc/ld.so.cache built by the host's
// ldconfig for that root. It returns the bytes of that ld.so.cache.
func buildGlibcRootfs(dir string) ([]byte, error) {
	if err := buildBusyboxRootfs(dir); err != nil {
		return nil, err
	}
	loader, libc, err := hostGlibc()
	if err != nil {
		return nil, err
	}
	libDir := filepath.Dir(libc)
	if err := copyInto(dir, loader); err != nil {
		return nil, err
	}
	for _, name := range glibcLibs {
		p := filepath.Join(libDir, name)
		if _, err := os.Stat(p); err != nil {
			continue // not on this host
		}
		if err := copyInto(dir, p); err != nil {
			return nil, err
		}
	}
	conf := "include /etc/ld.so.conf.d/*.conf\n"
	if err := os.MkdirAll(filepath.Join(dir, "etc/ld.so.conf.d"), 0o755); err != nil {
		return nil, fmt.Errorf("creating ld.so.conf.d in %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/ld.so.conf"), []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("writing ld.so.conf in %s: %w", dir, err)
	}
	ldconfig, err := lookPath("ldconfig")
	if err != nil {
		return nil, err
	}
	if _, err := output(nil, ldconfig, "-r", dir); err != nil {
		return nil, err
	}
	cache, err := os.ReadFile(filepath.Join(dir, "etc/ld.so.cache"))
	if err != nil {
		return nil, fmt.Errorf("reading the image's ld.so.cache: %w", err)
	}
	return cache, nil
}

// buildBusyboxRootfs writes the host's static busybox with a link per
// applet, /etc/passwd, /etc/group and the usual empty directories.
func buildBusyboxRootfs(dir string) error {
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "dev", "proc", "sys", "run", "root", "var", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("creating %s in %s: %w", d, dir, err)
		}
	}
	if err := copyFile(hostBusybox, filepath.Join(dir, "bin/busybox")); err != nil {
		return err
	}
	out, err := exec.Command(hostBusybox, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("%s --list-full: %w (install busybox-static)", hostBusybox, err)
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
	for name, data := range map[string]string{"etc/passwd": etcPasswd, "etc/group": etcGroup} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return fmt.Errorf("writing %s in %s: %w", name, dir, err)
		}
	}
	return nil
}

// hostGlibc returns the host's loader (PT_INTERP of /bin/sh) and libc.so.6.
func hostGlibc() (loader, libc string, err error) {
	const probe = "/bin/sh"
	f, err := elf.Open(probe)
	if err != nil {
		return "", "", fmt.Errorf("opening %s: %w", probe, err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			data, err := io.ReadAll(p.Open())
			if err != nil {
				return "", "", fmt.Errorf("reading PT_INTERP of %s: %w", probe, err)
			}
			loader = strings.TrimRight(string(data), "\x00")
		}
	}
	if loader == "" {
		return "", "", fmt.Errorf("%s has no PT_INTERP", probe)
	}
	out, err := exec.Command(loader, "--list", probe).Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --list %s: %w", loader, probe, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "libc.so.6" && f[1] == "=>" {
			return loader, f[2], nil
		}
	}
	return "", "", fmt.Errorf("libc.so.6 not in %s --list %s", loader, probe)
}

// copyInto copies the host file p (following links) to the same path
// under root.
func copyInto(root, p string) error {
	return copyFile(p, filepath.Join(root, filepath.Clean("/"+p)))
}

func copyFile(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(dst), err)
	}
	if err := os.WriteFile(dst, data, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}
