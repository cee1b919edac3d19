package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildSharedLibrary compiles the C source csrc with the compiler cc into
// the shared library out (its directory created), with the SONAME soname:
// the real ELF file the loader-cache, SONAME-scanner and hook tests read.
func BuildSharedLibrary(cc, out, soname, csrc string) error {
	dir, err := os.MkdirTemp("", "xpu-cdi-lib-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "lib.c")
	if err := os.WriteFile(src, []byte(csrc), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if b, err := exec.Command(cc, "-shared", "-fPIC", "-o", out, "-Wl,-soname,"+soname, src).CombinedOutput(); err != nil {
		return fmt.Errorf("%s -shared %s: %w: %s", cc, out, err, b)
	}
	return nil
}
