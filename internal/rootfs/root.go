package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// Root is an open handle on the top of a directory tree.
type Root struct {
	f    *os.File
	path string
	// fallback forces the pathrs-lite path, as on a kernel without
	// openat2 (tests).
	fallback bool
	// mntID is the root's mount ID (mntErr why it could not be read),
	// read once by Open so that a Root stays read-only after it.
	mntID  uint64
	mntErr error
}

// Open opens the directory at hostPath (a trusted path on the host) as a root.
func Open(hostPath string) (*Root, error) {
	fd, err := unix.Open(hostPath, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening root directory %s: %w", hostPath, &os.PathError{Op: "open", Path: hostPath, Err: err})
	}
	r := &Root{f: os.NewFile(uintptr(fd), hostPath), path: hostPath}
	r.mntID, r.mntErr = mountID(fd)
	return r, nil
}

// Close releases the root handle.
func (r *Root) Close() error { return r.f.Close() }

// Path returns the host path the root was opened with (for messages).
func (r *Root) Path() string { return r.path }

// Fd returns the root directory's file descriptor.
func (r *Root) Fd() int { return int(r.f.Fd()) }

// ErrCrossesMount is returned (wrapped, with EXDEV) for a directory opened
// for writing whose path crosses a mount point of the root's tree, or that
// lies on another mount than the root.
var ErrCrossesMount = errors.New("crosses a mount point (a volume or bind mount, not the image's own tree)")

// openat2 opens unsafePath inside the root with flags.
func (r *Root) openat2(unsafePath string, flags int) (*os.File, error) {
	fd, err := r.openat2Fd(unsafePath, flags)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), r.hostPath(unsafePath)), nil
}

// openSameMount opens unsafePath inside the root with flags, without
// crossing a mount point: RESOLVE_NO_XDEV with openat2; with the fallback,
// the mount ID of what was opened is compared with the root's.
func (r *Root) openSameMount(unsafePath string, flags int) (*os.File, error) {
	fd, err := r.openat2FdResolve(unsafePath, flags, unix.RESOLVE_NO_XDEV)
	if errors.Is(err, unix.EXDEV) {
		return nil, fmt.Errorf("%s in root %s: %w: %w", unsafePath, r.path, ErrCrossesMount, err)
	}
	if err != nil {
		return nil, err
	}
	// Also after openat2: cheap, and the one check that does not depend
	// on how the path was resolved.
	if err := r.sameMount(fd, unsafePath); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), r.hostPath(unsafePath)), nil
}

// sameMount fails (ErrCrossesMount, EXDEV) unless fd is on the root's mount.
func (r *Root) sameMount(fd int, unsafePath string) error {
	if r.mntErr != nil {
		return fmt.Errorf("mount ID of root %s: %w", r.path, r.mntErr)
	}
	id, err := mountID(fd)
	if err != nil {
		return fmt.Errorf("mount ID of %s in root %s: %w", unsafePath, r.path, err)
	}
	if id != r.mntID {
		return fmt.Errorf("%s in root %s: %w (mount %d, the root's is %d): %w", unsafePath, r.path, ErrCrossesMount, id, r.mntID,
			&os.PathError{Op: "openat", Path: unsafePath, Err: unix.EXDEV})
	}
	return nil
}

// mountID returns the ID of the mount fd is on: statx STATX_MNT_ID (Linux
// 5.8), else the mnt_id line of /proc/self/fdinfo (Linux 3.15).
func mountID(fd int) (uint64, error) {
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx)
	if err == nil && stx.Mask&unix.STATX_MNT_ID != 0 {
		return stx.Mnt_id, nil
	}
	return mountIDFromFdinfo(fd)
}

// mountIDFromFdinfo is mountID on kernels whose statx has no mount ID.
func mountIDFromFdinfo(fd int) (uint64, error) {
	data, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, fmt.Errorf("no statx mount ID and no fdinfo: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no mnt_id in fdinfo")
}

// hostPath is the host path of unsafePath, for names and messages.
func (r *Root) hostPath(unsafePath string) string {
	return path.Join(r.path, path.Clean("/"+unsafePath))
}

// openat2Fd opens unsafePath inside the root with flags and returns the bare
// descriptor. It falls back to pathrs-lite where the kernel has no openat2
// (or a seccomp filter hides it).
func (r *Root) openat2Fd(unsafePath string, flags int) (int, error) {
	return r.openat2FdResolve(unsafePath, flags, 0)
}

// openat2FdResolve is openat2Fd with more RESOLVE_ flags. The fallback
// ignores them: openSameMount checks the mount itself.
func (r *Root) openat2FdResolve(unsafePath string, flags int, resolve uint64) (int, error) {
	if !r.fallback {
		fd, err := fdio.Openat2InRoot(r.Fd(), unsafePath, flags, resolve)
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, fdio.ErrNoOpenat2) {
			return -1, &os.PathError{Op: "openat2", Path: unsafePath, Err: err}
		}
	}
	f, err := r.openFallback(unsafePath, flags)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	// A descriptor of our own: f's is closed with f (and by its finalizer).
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "dup", Path: unsafePath, Err: err}
	}
	return fd, nil
}

// openFallback is openat2Fd's path for kernels without openat2.
func (r *Root) openFallback(unsafePath string, flags int) (*os.File, error) {
	h, err := pathrs.OpenatInRoot(r.f, unsafePath)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	if flags&unix.O_PATH != 0 {
		return pathrs.Reopen(h, unix.O_PATH)
	}
	if flags&unix.O_DIRECTORY != 0 {
		fd, err := unix.Openat(int(h.Fd()), ".", flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "openat", Path: unsafePath, Err: err}
		}
		return os.NewFile(uintptr(fd), h.Name()), nil
	}
	return pathrs.Reopen(h, flags)
}

// OpenDir opens the directory at unsafePath inside the root for reading and
// for use as the base of the *at calls below.
func (r *Root) OpenDir(unsafePath string) (*os.File, error) {
	f, err := r.openat2(unsafePath, unix.O_DIRECTORY|unix.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("opening directory %s in root %s: %w", unsafePath, r.path, err)
	}
	return f, nil
}

// ErrKernelFS is returned by OpenFile for a file on a kernel file system
// (procfs, sysfs, ...).
var ErrKernelFS = fdio.ErrKernelFS

// OpenFile opens the regular file at unsafePath inside the root for reading.
// Symlinks are followed, inside the root.
func (r *Root) OpenFile(unsafePath string) (*os.File, error) {
	f, err := r.OpenRegular(unsafePath)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(f.fd), f.name), nil
}

// File is a regular file opened inside a root for positional reads. It is
// a bare descriptor, without what an *os.File brings (a registration with
// Go's poller, a finalizer): the hook opens every library of a folder to
// read a few hundred bytes of each. It is not safe for concurrent use with
// Close.
type File struct {
	fd   int
	name string
	size int64
}

// OpenRegular opens the regular file at unsafePath inside the root for
// reading, as OpenFile does (symlinks followed inside the root, anything
// but a regular file refused before it is opened, and the file checked to
// be the same after).
func (r *Root) OpenRegular(unsafePath string) (*File, error) {
	h, err := r.openat2Fd(unsafePath, unix.O_PATH)
	if err != nil {
		return nil, fmt.Errorf("opening %s in root %s: %w", unsafePath, r.path, err)
	}
	var before unix.Stat_t
	err = unix.Fstat(h, &before)
	if err != nil {
		_ = unix.Close(h)
		return nil, fmt.Errorf("stat %s in root %s: %w", unsafePath, r.path, err)
	}
	if before.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(h)
		return nil, fmt.Errorf("opening %s in root %s: %w (mode %#o)", unsafePath, r.path, fdio.ErrNotRegular, before.Mode&unix.S_IFMT)
	}
	// An image's link into the container's procfs (mounted when the hook
	// runs) reaches /proc/kmsg, a regular file whose read drains the host's
	// kernel log: refused on the handle, before it is opened for reading.
	err = fdio.CheckOrdinaryFS(h, r.hostPath(unsafePath))
	_ = unix.Close(h)
	if err != nil {
		return nil, fmt.Errorf("opening %s in root %s: %w", unsafePath, r.path, err)
	}
	fd, err := r.openat2Fd(unsafePath, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, fmt.Errorf("opening %s in root %s: %w", unsafePath, r.path, err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("stat %s in root %s: %w", unsafePath, r.path, err)
	}
	if after.Dev != before.Dev || after.Ino != before.Ino {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("opening %s in root %s: file replaced while opening it", unsafePath, r.path)
	}
	return &File{fd: fd, name: r.hostPath(unsafePath), size: after.Size}, nil
}

// Name returns the host path of the file (for messages).
func (f *File) Name() string { return f.name }

// Size returns the size of the file when it was opened.
func (f *File) Size() int64 { return f.size }

// ReadAt reads len(p) bytes at off, as io.ReaderAt: fewer only with an
// error, io.EOF at the end of the file.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	return fdio.ReadFullAt(f.fd, f.name, p, off)
}

// Close closes the file.
func (f *File) Close() error {
	if err := unix.Close(f.fd); err != nil {
		return &os.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

// OpenDirForWrite opens the directory at unsafePath inside the root, as
// OpenDir, for creating or replacing files in it: the path must not cross
// a mount point and the directory must be on the root's mount
// (ErrCrossesMount), so that an image cannot lead a write into a volume or
// bind mount (a host directory) through a symlink.
func (r *Root) OpenDirForWrite(unsafePath string) (*os.File, error) {
	f, err := r.openSameMount(unsafePath, unix.O_DIRECTORY|unix.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("opening directory %s in root %s for writing: %w", unsafePath, r.path, err)
	}
	return f, nil
}

// MkdirAll returns a handle on the directory unsafePath inside the root,
// creating it and its missing parents (mode perm), for writing into: as
// OpenDirForWrite, neither the directory nor any parent it resolves or
// creates may be on another mount than the root. A symlink that leads
// nowhere is not followed to create its target (ENOENT).
func (r *Root) MkdirAll(unsafePath string, perm os.FileMode) (*os.File, error) {
	d, err := r.OpenDirForWrite(unsafePath)
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return d, err
	}
	cur := "/"
	parent, err := r.OpenDirForWrite(cur)
	if err != nil {
		return nil, err
	}
	for _, name := range strings.Split(strings.Trim(path.Clean("/"+unsafePath), "/"), "/") {
		next := path.Join(cur, name)
		d, err := r.OpenDirForWrite(next)
		if errors.Is(err, unix.ENOENT) {
			// By name in the parent's handle: a symlink in the way is
			// not followed (EEXIST), and the reopen below resolves it.
			if merr := unix.Mkdirat(int(parent.Fd()), name, uint32(perm.Perm())); merr != nil && !errors.Is(merr, unix.EEXIST) {
				_ = parent.Close()
				return nil, fmt.Errorf("creating directory %s in root %s: %w", next, r.path, &os.PathError{Op: "mkdirat", Path: next, Err: merr})
			}
			d, err = r.OpenDirForWrite(next)
		}
		_ = parent.Close()
		if err != nil {
			return nil, err
		}
		parent, cur = d, next
	}
	return parent, nil
}

var tmpCounter atomic.Uint64

// TempName returns a name for a temporary sibling of name, unlikely to exist.
func TempName(name string) string {
	n := tmpCounter.Add(1)
	return "." + name + ".xpu-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(n, 36) +
		strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
}

// checkName refuses anything but a single path component.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || path.Base(name) != name {
		return fmt.Errorf("%q is not a single file name", name)
	}
	return nil
}

// WriteFileAtomic replaces dir/name with data: it writes a new file under a
// temporary name in dir and renames it over name, without fsync (see the
// package documentation). A symlink at name is replaced, not followed. On
// failure the old file is left intact.
func WriteFileAtomic(dir *os.File, name string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(dir, name, data, perm, false)
}

// WriteFileDurable is WriteFileAtomic with the file fsynced before the
// rename and dir after it: after a crash name is the old file or the new
// one, never empty. For files on the host that outlive a container start
// (the hook binary a node installer puts there), where the cost of fsync
// is paid once, not at every container creation.
func WriteFileDurable(dir *os.File, name string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(dir, name, data, perm, true)
}

func writeFileAtomic(dir *os.File, name string, data []byte, perm os.FileMode, durable bool) (err error) {
	if err := checkName(name); err != nil {
		return err
	}
	tmp := TempName(name)
	fd, err := unix.Openat(int(dir.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return fmt.Errorf("creating %s/%s: %w", dir.Name(), tmp, err)
	}
	f := os.NewFile(uintptr(fd), dir.Name()+"/"+tmp)
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		if err != nil {
			_ = unix.Unlinkat(int(dir.Fd()), tmp, 0)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil {
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("syncing %s: %w", f.Name(), err)
		}
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return fmt.Errorf("closing %s: %w", dir.Name()+"/"+tmp, cerr)
	}
	if err := unix.Renameat(int(dir.Fd()), tmp, int(dir.Fd()), name); err != nil {
		return fmt.Errorf("renaming %s/%s to %s: %w", dir.Name(), tmp, name, err)
	}
	if durable {
		if err := dir.Sync(); err != nil {
			return fmt.Errorf("syncing directory %s: %w", dir.Name(), err)
		}
	}
	return nil
}

// ReadFile reads the regular file at unsafePath inside the root, refusing
// files larger than limit bytes.
func (r *Root) ReadFile(unsafePath string, limit int64) ([]byte, error) {
	f, err := r.OpenRegular(unsafePath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	if f.size > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d allowed", f.name, f.size, limit)
	}
	buf := make([]byte, f.size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && n != len(buf) {
		return nil, fmt.Errorf("reading %s: %w", f.name, err)
	}
	return buf[:n], nil
}
