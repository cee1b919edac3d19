package discover

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// maxAttrSize bounds what is read of one kernel text file: attributes are a
// few bytes, procfs info files a few hundred.
const maxAttrSize = 64 << 10

// attrDir reads the small text files of one sysfs or procfs directory.
// The directory is opened once and its files with openat, so the path (and
// the symlinks in it: /sys/class/xpu/xpuN/device) is resolved once per
// device, not once per file; each file costs open, read, read, close, where
// os.ReadFile adds an fstat and a poller registration. Discovery reads
// about ten such files per device, and hosts have hundreds of devices.
type attrDir struct {
	path string
	fd   int
}

// hostRoot is the dev root, opened once per discovery: every file and
// directory discovery reads below it (/proc, /sys) is opened with every
// directory on the way resolved inside it (fdio.Root: openat2
// RESOLVE_IN_ROOT), so a symlinked directory (proc/xpu -> ../../elsewhere,
// sys/module/kunlun -> /elsewhere) cannot lead a read out of the tree.
type hostRoot struct{ *fdio.Root }

func newHostRoot(devRoot string) hostRoot { return hostRoot{fdio.NewRoot(devRoot)} }

func (r hostRoot) close() { _ = r.Close() }

// openAttrDir opens the directory at the in-root path p.
func (r hostRoot) openAttrDir(p string) (*attrDir, error) {
	fd, err := r.OpenDir(p)
	if err != nil {
		return nil, err
	}
	return &attrDir{path: r.HostPath(p), fd: fd}, nil
}

// readSmall reads the small kernel text file at the in-root path p. A
// final symlink is refused (O_NOFOLLOW), as attrDir.read does: kernel text
// files (/proc/xpu/version, a sysfs dev attribute) are never links, and one
// planted in a dev root would lead the read to a file elsewhere (a 0600
// file published as a label, /proc/kmsg drained); the directories on the
// way are resolved inside the root.
func (r hostRoot) readSmall(p string) ([]byte, error) {
	fd, _, err := r.OpenRegular(p)
	if err != nil {
		return nil, err
	}
	return readSmallFd(fd, r.HostPath(p))
}

// stat, lstat and readDir are os.Stat, os.Lstat and os.ReadDir of the
// in-root path p.
func (r hostRoot) stat(p string) (os.FileInfo, error)      { return r.Stat(p) }
func (r hostRoot) lstat(p string) (os.FileInfo, error)     { return r.Lstat(p) }
func (r hostRoot) readDir(p string) ([]os.DirEntry, error) { return r.ReadDir(p) }

func (d *attrDir) close() { _ = unix.Close(d.fd) }

// read returns the content of the file name in the directory. Kernel
// attribute files are never symlinks: one planted in a fake tree is
// refused, not followed out of it.
func (d *attrDir) read(name string) ([]byte, error) {
	return readSmallAt(d.fd, name, filepath.Join(d.path, name), unix.O_NOFOLLOW)
}

// readlink returns the target of the symlink name in the directory.
func (d *attrDir) readlink(name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(d.fd, name, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlink", Path: filepath.Join(d.path, name), Err: err}
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// openRegularAt is fdio.OpenRegularAt for discovery's readers: a file that
// discovery reads (a procfs or sysfs file, a library, a loader cache) which
// is a FIFO, a device, a socket or a directory is opened without blocking
// and refused before any read (fdio.ErrNotRegular), so a FIFO planted in a
// driver root cannot hang generate, nor the shim's jit mode.
func openRegularAt(dirfd int, name, path string, flags int) (int, error) {
	fd, _, err := fdio.OpenRegularAt(dirfd, name, path, flags)
	return fd, err
}

func readSmallAt(dirfd int, name, path string, flags int) ([]byte, error) {
	fd, err := openRegularAt(dirfd, name, path, flags)
	if err != nil {
		return nil, err
	}
	return readSmallFd(fd, path)
}

// readSmallFd reads fd (closing it) whole, at most maxAttrSize bytes.
func readSmallFd(fd int, path string) ([]byte, error) {
	defer func() { _ = unix.Close(fd) }() // read-only
	var stack [512]byte
	buf := stack[:0]
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= maxAttrSize {
				return nil, fmt.Errorf("reading %s: larger than %d bytes", path, maxAttrSize)
			}
			buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}
