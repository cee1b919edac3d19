package nodeinstall

import (
	"errors"
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
)

// ensureDir opens the directory p of the host, resolved inside r, creating
// it and its missing parents (0755 root:root, mkdirRoot). It returns the host paths of the
// directories it created, parents first. Unlike rootfs.MkdirAll it crosses
// mount points: the host's own mounts (/run, /opt on its own disk) are
// where these files belong, and the host root is trusted.
func ensureDir(r *rootfs.Root, p string) (*os.File, []string, error) {
	p = path.Clean(p)
	d, err := r.OpenDir(p)
	if err == nil || !errors.Is(err, unix.ENOENT) || p == "/" {
		return d, nil, err
	}
	parent, created, err := ensureDir(r, path.Dir(p))
	if err != nil {
		return nil, nil, err
	}
	defer parent.Close()
	if err := mkdirRoot(parent, path.Base(p), p); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, nil, fmt.Errorf("creating %s: %w", p, err)
	} else if err == nil {
		created = append(created, p)
	}
	d, err = r.OpenDir(p)
	return d, created, err
}

// openNoFollow opens the directory name in parent, refusing a symlink.
func openNoFollow(parent *os.File, name, hostPath string) (*os.File, error) {
	fd, err := unix.Openat(int(parent.Fd()), name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: hostPath, Err: err}
	}
	return os.NewFile(uintptr(fd), hostPath), nil
}

// lstatAt is fstatat without following a symlink at name.
func lstatAt(dir *os.File, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// readAt reads the regular file name in dir (not following a symlink),
// at most limit bytes, as every host file is read (fdio: non-blocking, a
// regular file on an ordinary file system); os.ErrNotExist when absent.
func readAt(dir *os.File, name string, limit int64) ([]byte, error) {
	data, _, err := fdio.ReadFileAt(int(dir.Fd()), name, dir.Name()+"/"+name, unix.O_NOFOLLOW, limit)
	return data, err
}
