package fdio

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// OpenRegularAt opens name relative to dirfd (unix.AT_FDCWD for a path)
// read-only, without blocking and with flags added (unix.O_NOFOLLOW, say),
// and refuses anything but a regular file. path names the file in errors.
// It returns the descriptor and what fstat said of it. It accepts files of
// kernel file systems (procfs, sysfs): the readers of anything else use
// Open or ReadFileAt.
func OpenRegularAt(dirfd int, name, path string, flags int) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK|flags, 0)
	if err != nil {
		return -1, st, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, st, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return -1, st, fmt.Errorf("%s: %w (mode %#o)", path, ErrNotRegular, st.Mode&unix.S_IFMT)
	}
	return fd, st, nil
}

// kernelFS are the file systems whose files are the kernel's interfaces,
// not stored bytes: reading one can change kernel state (/proc/kmsg takes
// the messages it returns, a tracefs pipe drains its buffer) or block. No
// library, loader cache or configuration file lives on one. (devtmpfs
// reports tmpfs's magic; its regular files are ordinary.)
var kernelFS = map[int64]string{
	unix.PROC_SUPER_MAGIC:     "procfs",
	unix.SYSFS_MAGIC:          "sysfs",
	unix.DEBUGFS_MAGIC:        "debugfs",
	unix.TRACEFS_MAGIC:        "tracefs",
	unix.SECURITYFS_MAGIC:     "securityfs",
	unix.CGROUP_SUPER_MAGIC:   "cgroup",
	unix.CGROUP2_SUPER_MAGIC:  "cgroup2",
	unix.BPF_FS_MAGIC:         "bpf",
	0x62656570:                "configfs",
	unix.EFIVARFS_MAGIC:       "efivarfs",
	unix.PSTOREFS_MAGIC:       "pstore",
	unix.SELINUX_MAGIC:        "selinuxfs",
	unix.SMACK_MAGIC:          "smackfs",
	unix.BINFMTFS_MAGIC:       "binfmt_misc",
	unix.DEVPTS_SUPER_MAGIC:   "devpts",
	unix.NSFS_MAGIC:           "nsfs",
	0x65735543:                "fusectl",
	0x19800202:                "mqueue",
	unix.RDTGROUP_SUPER_MAGIC: "resctrl",
	unix.ANON_INODE_FS_MAGIC:  "anon_inodefs",
	unix.PIPEFS_MAGIC:         "pipefs",
	unix.SOCKFS_MAGIC:         "sockfs",
}

// CheckOrdinaryFS refuses fd (an O_PATH handle will do) when its file is
// on a kernel file system (ErrKernelFS, naming it); path names the file in
// errors.
func CheckOrdinaryFS(fd int, path string) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	if name, ok := kernelFS[int64(st.Type)]; ok { //nolint:unconvert // Statfs_t.Type is int32 on some architectures
		return fmt.Errorf("%s: %w (%s)", path, ErrKernelFS, name)
	}
	return nil
}

// openOrdinaryAt is OpenRegularAt that also refuses files of kernel file
// systems, before the caller reads a byte.
func openOrdinaryAt(dirfd int, name, path string, flags int) (int, unix.Stat_t, error) {
	fd, st, err := OpenRegularAt(dirfd, name, path, flags)
	if err != nil {
		return -1, st, err
	}
	if err := CheckOrdinaryFS(fd, path); err != nil {
		_ = unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// ReadFullAt reads len(b) bytes of fd at off, as io.ReaderAt does: fewer
// only with an error, io.EOF at the end of the file. path names the file in
// errors.
func ReadFullAt(fd int, path string, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Pread(fd, b[n:], off+int64(n))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return n, &os.PathError{Op: "read", Path: path, Err: err}
		case m == 0:
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// ReadFileAt reads the regular file name relative to dirfd (opened as
// OpenRegularAt does, and refused on a kernel file system) whole, and returns it with its permission bits. A
// file of more than limit bytes is refused (ErrTooLarge); one that shrinks
// while it is read is returned as far as it goes; one that grows is read
// up to the size it had when opened.
func ReadFileAt(dirfd int, name, path string, flags int, limit int64) ([]byte, os.FileMode, error) {
	fd, st, err := openOrdinaryAt(dirfd, name, path, flags)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = unix.Close(fd) }() // read-only
	if st.Size > limit {
		return nil, 0, fmt.Errorf("%s: %w: %d bytes, at most %d are read", path, ErrTooLarge, st.Size, limit)
	}
	buf := make([]byte, st.Size)
	n, err := ReadFullAt(fd, path, buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	return buf[:n], os.FileMode(st.Mode & 0o777), nil
}

// File is a regular file open for preads only, without the os.File
// machinery (poller registration, finalizer): scans open hundreds of them.
type File struct {
	fd   int
	path string
}

// Open opens name relative to dirfd as OpenRegularAt does, refusing a file
// on a kernel file system; path names it in errors.
func Open(dirfd int, name, path string, flags int) (*File, error) {
	fd, _, err := openOrdinaryAt(dirfd, name, path, flags)
	if err != nil {
		return nil, err
	}
	return &File{fd: fd, path: path}, nil
}

// ReadAt reads as io.ReaderAt (ReadFullAt).
func (f *File) ReadAt(b []byte, off int64) (int, error) { return ReadFullAt(f.fd, f.path, b, off) }

// Close closes the descriptor.
func (f *File) Close() error { return unix.Close(f.fd) }
