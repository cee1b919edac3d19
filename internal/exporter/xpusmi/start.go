package xpusmi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// ErrNoLoader is wrapped by the error of an xpu-smi that exists but cannot
// start because the program that loads it is missing from the root it
// runs in: the dynamic loader of its PT_INTERP (a glibc program run
// outside the host's root) or the interpreter of its "#!" line. execve
// says ENOENT then, as for a missing xpu-smi.
var ErrNoLoader = errors.New("loader missing")

// LoaderError names the missing loader; it matches ErrNoLoader.
type LoaderError struct{ Loader string }

func (e *LoaderError) Error() string        { return "its loader " + e.Loader + " is missing" }
func (e *LoaderError) Is(target error) bool { return target == ErrNoLoader }

// whyNotStarted explains an execve of the runner's program that failed with
// ENOENT: nil when the program itself is missing (the ENOENT is right),
// else an error naming the missing loader. The program and its loader are
// looked up inside the root the program runs in (the chroot, or /), links
// followed inside it; the program is read bounded and without blocking
// (elfso.Interpreter).
func (r *Runner) whyNotStarted() error {
	dir := r.o.Chroot
	if dir == "" {
		dir = "/"
	}
	root := fdio.NewRoot(dir)
	defer func() { _ = root.Close() }()
	fd, err := root.OpenAt(r.path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), root.HostPath(r.path))
	defer func() { _ = f.Close() }() // read-only
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	interp, err := elfso.Interpreter(f, st.Size())
	if err != nil || interp == "" {
		return nil
	}
	if _, err := root.Stat(interp); errors.Is(err, fs.ErrNotExist) {
		where := "from /, the exporter's own root (no chroot)"
		if r.o.Chroot != "" {
			where = "from " + r.o.Chroot + ", the root it runs in"
		}
		return fmt.Errorf("xpu-smi at %s cannot start: %w %s; a glibc program of the host's XRE needs the host's loader: run it on the host, or in a chroot into the host root (--host-root with --xpu-smi-chroot)",
			r, &LoaderError{Loader: interp}, where)
	}
	return nil
}
