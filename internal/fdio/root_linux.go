package fdio

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// Root is a host tree (a dev root: /dev, /proc and /sys below it) opened by
// its top, for opening paths below it with every component, directories
// included, resolved inside it: a symlinked directory on the way
// (proc/xpu -> ../../elsewhere, sys/module/kunlun -> /elsewhere) is followed
// as if the root were "/", so no read leaves the tree. Unlike
// internal/rootfs, which reads container images, it reads kernel file
// systems (procfs, sysfs) too. The root is opened at the first use; a
// root that cannot be opened makes every open fail with that error.
type Root struct {
	path string
	f    *os.File
	err  error
	// fallback forces the path of kernels without openat2 (tests).
	fallback bool
}

// NewRoot returns the Root of the host directory path (trusted). Close it.
func NewRoot(path string) *Root { return &Root{path: path} }

// Close releases the root's descriptor.
func (r *Root) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f, r.err = nil, errors.New("root closed")
	return err
}

// HostPath is the host path of the in-root path p, for messages.
func (r *Root) HostPath(p string) string { return filepath.Join(r.path, path.Clean("/"+p)) }

func (r *Root) root() (*os.File, error) {
	if r.f == nil && r.err == nil {
		fd, err := unix.Open(r.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			r.err = &os.PathError{Op: "open", Path: r.path, Err: err}
		} else {
			r.f = os.NewFile(uintptr(fd), r.path)
		}
	}
	return r.f, r.err
}

// OpenAt opens the in-root path p with flags (O_CLOEXEC is added) and
// returns the bare descriptor: openat2 with RESOLVE_IN_ROOT and
// RESOLVE_NO_MAGICLINKS, or filepath-securejoin's pathrs-lite where the
// kernel has no openat2 (or a seccomp filter hides it), which resolves as
// openat2 does and reopens the handle with flags. Errors are
// *os.PathError naming the host path with Op "open", as an open(2) of
// the joined path gives.
func (r *Root) OpenAt(p string, flags int) (int, error) {
	host := r.HostPath(p)
	root, err := r.root()
	if err != nil {
		return -1, err
	}
	rel := path.Clean("/" + p)
	if !r.fallback {
		fd, err := Openat2InRoot(int(root.Fd()), rel, flags, 0)
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, ErrNoOpenat2) {
			return -1, &os.PathError{Op: "open", Path: host, Err: err}
		}
	}
	return r.openFallback(root, rel, host, flags)
}

// openFallback is OpenAt on a kernel without openat2.
func (r *Root) openFallback(root *os.File, rel, host string, flags int) (int, error) {
	if flags&unix.O_NOFOLLOW != 0 && rel != "/" {
		// pathrs-lite follows a final symlink: resolve the directory,
		// then open the name in it.
		dir, err := r.openFallback(root, path.Dir(rel), filepath.Dir(host), unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return -1, err
		}
		defer func() { _ = unix.Close(dir) }()
		fd, err := unix.Openat(dir, path.Base(rel), flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: host, Err: err}
		}
		return fd, nil
	}
	h, err := pathrs.OpenatInRoot(root, rel)
	if err != nil {
		var perr *os.PathError
		if errors.As(err, &perr) {
			return -1, &os.PathError{Op: "open", Path: host, Err: perr.Err}
		}
		return -1, fmt.Errorf("open %s: %w", host, err)
	}
	defer h.Close()
	if flags&unix.O_DIRECTORY != 0 {
		var st unix.Stat_t
		if err := unix.Fstat(int(h.Fd()), &st); err != nil {
			return -1, &os.PathError{Op: "stat", Path: host, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return -1, &os.PathError{Op: "open", Path: host, Err: unix.ENOTDIR}
		}
	}
	if flags&unix.O_PATH != 0 {
		fd, err := unix.FcntlInt(h.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return -1, &os.PathError{Op: "dup", Path: host, Err: err}
		}
		return fd, nil
	}
	f, err := pathrs.Reopen(h, flags|unix.O_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", host, err)
	}
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "dup", Path: host, Err: err}
	}
	return fd, nil
}

// OpenDir opens the directory at the in-root path p as an O_PATH handle,
// the base of *at calls.
func (r *Root) OpenDir(p string) (int, error) {
	return r.OpenAt(p, unix.O_PATH|unix.O_DIRECTORY)
}

// OpenRegular opens the regular file at the in-root path p as
// OpenRegularAt does with O_NOFOLLOW: its directory is resolved inside the
// root, the file itself is never a symlink (kernel text files are not),
// and anything but a regular file is refused without blocking.
func (r *Root) OpenRegular(p string) (int, unix.Stat_t, error) {
	rel := path.Clean("/" + p)
	dir, err := r.OpenDir(path.Dir(rel))
	if err != nil {
		return -1, unix.Stat_t{}, err
	}
	defer func() { _ = unix.Close(dir) }()
	return OpenRegularAt(dir, path.Base(rel), r.HostPath(rel), unix.O_NOFOLLOW)
}

// Stat is stat(2) of the in-root path p, a final symlink followed inside
// the root.
func (r *Root) Stat(p string) (os.FileInfo, error) {
	return r.stat(p, 0)
}

// Lstat is lstat(2) of the in-root path p: its directory resolved inside
// the root, a final symlink not followed.
func (r *Root) Lstat(p string) (os.FileInfo, error) {
	return r.stat(p, unix.O_NOFOLLOW)
}

func (r *Root) stat(p string, flags int) (os.FileInfo, error) {
	rel := path.Clean("/" + p)
	fd, err := r.OpenAt(rel, unix.O_PATH|flags)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), r.HostPath(rel))
	defer f.Close()
	return f.Stat()
}

// ReadDir lists the directory at the in-root path p, sorted by name.
func (r *Root) ReadDir(p string) ([]os.DirEntry, error) {
	fd, err := r.OpenAt(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), r.HostPath(p))
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}
