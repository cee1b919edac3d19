package fakehost

import (
	"fmt"
	"os"
	"path/filepath"
)

// XRE paths inside the tree.
const (
	XRELink       = "/usr/local/xpu"
	XPUSMIPath    = "/usr/local/xpu/bin/xpu_smi"
	XPUSMILink    = "/usr/local/bin/xpu-smi"
	LdSoConfPath  = "/etc/ld.so.conf.d/xpu.conf"
	LdCachePath   = "/etc/ld.so.cache"
	XRELibDir     = XRELink + "/lib64" // as ld.so.conf.d names it
	UdevRulesPath = "/etc/udev/rules.d/99-kunlun.rules"
)

// XREDir is the versioned install directory the /usr/local/xpu link names.
func XREDir(version string) string { return "/usr/local/xpu-" + version }

// buildDriver writes the XRE: libraries, links, xpu_smi, ld.so.conf.d and
// ld.so.cache, and the udev rule when the host has one.
func (b *builder) buildDriver() error {
	h := b.h
	if h.UdevRule {
		if err := b.writeText(UdevRulesPath, "KERNEL==\"xpu*\", MODE=\"0666\"\n", 0o644); err != nil {
			return err
		}
	}
	if h.NoDriver {
		return nil
	}
	tc, err := loadToolchain(b.o.cacheDir, b.o.cc)
	if err != nil {
		return err
	}
	xre := XREDir(h.XREVersion)
	lib64 := xre + "/lib64"
	if err := b.mkdir(lib64); err != nil {
		return err
	}
	if err := b.symlink(xre, XRELink); err != nil {
		return err
	}
	b.t.XREDir, b.t.XRELink = xre, XRELink
	for _, l := range h.Libraries {
		var img []byte
		if l.SONAME == "libxpurt.so.1" {
			img, err = tc.xpurtImage(h.XREVersion)
		} else {
			img, err = tc.libraryImage(l.SONAME)
		}
		if err != nil {
			return fmt.Errorf("library %s: %w", l.File, err)
		}
		p := lib64 + "/" + l.File
		if err := b.writeFile(p, img, 0o755); err != nil {
			return err
		}
		b.t.Libraries = append(b.t.Libraries, TreeLibrary{Path: p, SONAME: l.SONAME})
		if l.SONAME != l.File { // ldconfig would create the SONAME link
			if err := b.symlink(p, lib64+"/"+l.SONAME); err != nil {
				return err
			}
		}
		for _, dl := range l.DevLinks {
			if err := b.symlink(p, lib64+"/"+dl); err != nil {
				return err
			}
		}
	}
	if !h.NoXPUSMI {
		smi := xre + "/bin/xpu_smi"
		if err := b.writeFile(smi, tc.xpuSMI, 0o755); err != nil {
			return err
		}
		// The link goes through /usr/local/xpu like the vendor's installer.
		if err := b.symlink(XPUSMIPath, XPUSMILink); err != nil {
			return err
		}
		b.t.Tools = append(b.t.Tools, XPUSMIPath, XPUSMILink)
	}
	if err := b.writeText(LdSoConfPath, XRELibDir+"\n", 0o644); err != nil {
		return err
	}
	b.t.LdSoConf = LdSoConfPath
	return b.buildLdCache()
}

// BuildTestProgram writes xpu-test, a dynamically linked glibc program that
// needs libxpurt.so.1 and prints the device count and the XRE version, to
// dst (mode 0755). It exits 0 when the library loads.
func BuildTestProgram(dst string, opts ...Option) error {
	o, err := newOptions(opts)
	if err != nil {
		return err
	}
	tc, err := loadToolchain(o.cacheDir, o.cc)
	if err != nil {
		return err
	}
	src := filepath.Join(tc.dir, artXPUTest)
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading cached %s: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("creating directory for %s: %w", dst, err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		return fmt.Errorf("setting mode of %s: %w", dst, err)
	}
	return nil
}
