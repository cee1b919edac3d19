package sriov

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The kernel's SR-IOV attributes of a PF (Documentation/ABI/testing/sysfs-bus-pci).
const (
	attrNumVFs   = "sriov_numvfs"
	virtfnPrefix = "virtfn"
	maxAttr      = 64
)

// pciDevices is where every PCI function has a link to its directory.
const pciDevices = "/sys/bus/pci/devices"

// sysfs writes and reads the SR-IOV attributes of PFs below a dev root.
// Every path is resolved inside the root (openat2 RESOLVE_IN_ROOT, package
// rootfs): a link in a hostile tree cannot lead a write out of it. The
// attribute itself is opened by name in the resolved directory, never
// through a symlink, without waiting (O_NONBLOCK: a FIFO there does not
// hang the open), and must be a regular file with one link (a kernel
// attribute never has a second one; a hard link to a file elsewhere on
// the tree's file system is refused, not written).
type sysfs struct {
	root *rootfs.Root
}

func openSysfs(devRoot string) (*sysfs, error) {
	r, err := rootfs.Open(devRoot)
	if err != nil {
		return nil, fmt.Errorf("opening the dev root %s: %w", devRoot, err)
	}
	return &sysfs{root: r}, nil
}

func (s *sysfs) close() { _ = s.root.Close() }

// pfDir is the in-root path of a PF's directory (a link the root resolves).
func pfDir(addr string) string { return pciDevices + "/" + addr }

// hostPath names an in-root path for messages.
func (s *sysfs) hostPath(p string) string { return path.Join(s.root.Path(), p) }

// openAttr opens a PF's attribute with flags.
func (s *sysfs) openAttr(addr, name string, flags int) (int, error) {
	if !discover.IsPCIAddress(addr) {
		return -1, fmt.Errorf("%q is not a PCI address", addr)
	}
	dir, err := s.root.OpenDir(pfDir(addr))
	if err != nil {
		return -1, err
	}
	defer dir.Close()
	p := s.hostPath(pfDir(addr) + "/" + name)
	// The type first, so that not even an open reaches a device node.
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if err := checkAttr(&st); err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	fd, err := unix.Openat(int(dir.Fd()), name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil || checkAttr(&st) != nil {
		_ = unix.Close(fd)
		if err == nil {
			err = checkAttr(&st)
		}
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// checkAttr refuses what a sysfs attribute is not: anything but a regular
// file, or a file with another link.
func checkAttr(st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("not a regular file (a sysfs attribute is one)")
	}
	if st.Nlink != 1 {
		return fmt.Errorf("a hard link (%d links; a sysfs attribute has one)", st.Nlink)
	}
	return nil
}

// readNumVFs reads a PF's sriov_numvfs.
func (s *sysfs) readNumVFs(addr string) (int, error) {
	const name = attrNumVFs
	fd, err := s.openAttr(addr, name, unix.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer func() { _ = unix.Close(fd) }()
	b := make([]byte, maxAttr)
	n, err := unix.Read(fd, b)
	if err != nil {
		return 0, &os.PathError{Op: "read", Path: s.hostPath(pfDir(addr) + "/" + name), Err: err}
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s: %q is not a count", s.hostPath(pfDir(addr)+"/"+name), strings.TrimSpace(string(b[:n])))
	}
	return v, nil
}

// writeNumVFs writes n to a PF's sriov_numvfs, as `echo n >` does.
func (s *sysfs) writeNumVFs(addr string, n int) error {
	fd, err := s.openAttr(addr, attrNumVFs, unix.O_WRONLY)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	data := []byte(strconv.Itoa(n) + "\n")
	w, err := unix.Write(fd, data)
	if err == nil && w != len(data) {
		err = fmt.Errorf("short write (%d of %d bytes)", w, len(data))
	}
	if err != nil {
		return &os.PathError{Op: "write " + strconv.Itoa(n) + " to", Path: s.hostPath(pfDir(addr) + "/" + attrNumVFs), Err: err}
	}
	return nil
}

// virtfns returns the PCI addresses the PF's virtfnK links lead to, by K
// (a K without a link, or a link leading to no function with physfn, is
// an error naming it), and fails when links exist past K = n-1.
func (s *sysfs) virtfns(addr string, n int) ([]string, error) {
	dir, err := s.root.OpenDir(pfDir(addr))
	if err != nil {
		return nil, err
	}
	names, err := dir.Readdirnames(-1)
	_ = dir.Close()
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", s.hostPath(pfDir(addr)), err)
	}
	var ks []int
	for _, name := range names {
		if k, ok := strings.CutPrefix(name, virtfnPrefix); ok {
			if i, err := strconv.Atoi(k); err == nil {
				ks = append(ks, i)
			}
		}
	}
	slices.Sort(ks)
	if len(ks) != n || (n > 0 && ks[n-1] != n-1) {
		return nil, fmt.Errorf("%s has virtfn links %v, not virtfn0..virtfn%d", s.hostPath(pfDir(addr)), ks, n-1)
	}
	addrs := make([]string, n)
	for k := range n {
		p := fmt.Sprintf("%s/%s%d", pfDir(addr), virtfnPrefix, k)
		vf, err := s.root.OpenDir(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.hostPath(p), err)
		}
		var st unix.Stat_t
		err = unix.Fstatat(int(vf.Fd()), "physfn", &st, unix.AT_SYMLINK_NOFOLLOW)
		target, lerr := os.Readlink(s.hostPath(p))
		_ = vf.Close()
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT):
			return nil, fmt.Errorf("%s leads to a function without physfn: not a VF (yet)", s.hostPath(p))
		case err != nil:
			return nil, fmt.Errorf("%s/physfn: %w", s.hostPath(p), err)
		case st.Mode&unix.S_IFMT != unix.S_IFLNK:
			return nil, fmt.Errorf("%s/physfn is not a link", s.hostPath(p))
		case lerr != nil:
			return nil, lerr
		}
		addrs[k] = path.Base(target)
	}
	return addrs, nil
}
