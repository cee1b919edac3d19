package nodeinstall

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
)

// ErrUntrustedDir is wrapped by the errors for a directory on the way to
// what the installer writes that someone other than root can change.
var ErrUntrustedDir = errors.New("writable by someone other than root")

// dirInfo is what the trust rule looks at of one directory.
type dirInfo struct {
	uid, gid uint32
	mode     uint32 // st_mode: type and permission bits
}

// checkTrusted applies the rule of sshd's StrictModes to the directory
// (or the installer's own record) hostPath: it must be owned by root (or
// by the installer's own user, euid: a test run as a user, where nobody
// else is concerned) and writable by its owner only. checkPath lets a
// sticky directory (/tmp) through as a parent on conditions of its own
// (stickyParent); as the directory written to it is refused: others can
// add files there (a spec offering devices, say).
func checkTrusted(hostPath string, st dirInfo, euid int) error {
	if trustedOwner(st.uid, euid) && st.mode&0o022 == 0 {
		return nil
	}
	why := "owned by uid " + fmt.Sprint(st.uid)
	if trustedOwner(st.uid, euid) {
		why = "writable by its group or by everyone"
		if st.mode&0o002 != 0 && st.mode&unix.S_ISVTX != 0 {
			why = "writable by everyone (sticky, as /tmp)"
		}
	}
	return fmt.Errorf("%s (owner %d:%d, mode %s): %w: %s, and whoever can write it can replace what xpu-cdi install writes there (the hook runs as root at every container start); give a path owned by root and writable only by root (chown root:root, chmod go-w)", hostPath, st.uid, st.gid, modeString(st.mode), ErrUntrustedDir, why)
}

// trustedOwner reports whether uid is root or the installer's own user.
func trustedOwner(uid uint32, euid int) bool { return uid == 0 || int64(uid) == int64(euid) }

// stickyParent reports whether st is a sticky directory of a trusted
// owner that others may write (/tmp, 1777). Such a directory is a safe
// parent when the entry looked up in it is a trusted owner's: the sticky
// bit keeps others from renaming or removing that entry, so the path
// below cannot be swapped. An entry another user made there (a directory,
// or a symlink leading anywhere) is refused; a missing one is created by
// the installer and checked again once it exists, so a name taken first
// by someone else is refused, never used.
func stickyParent(st dirInfo, euid int) bool {
	return trustedOwner(st.uid, euid) && st.mode&unix.S_ISVTX != 0
}

// modeString shows permission bits as ls and stat(1) do, with the octal
// value: drwxrwxrwt (1777).
func modeString(mode uint32) string {
	var b strings.Builder
	b.WriteByte(map[bool]byte{true: 'd', false: '-'}[mode&unix.S_IFMT == unix.S_IFDIR])
	const rwx = "rwxrwxrwx"
	for i := range 9 {
		bit := uint32(1) << (8 - i)
		c := byte('-')
		if mode&bit != 0 {
			c = rwx[i]
		}
		// setuid, setgid and sticky replace the execute letters.
		switch {
		case i == 2 && mode&unix.S_ISUID != 0, i == 5 && mode&unix.S_ISGID != 0:
			c = map[bool]byte{true: 's', false: 'S'}[c == 'x']
		case i == 8 && mode&unix.S_ISVTX != 0:
			c = map[bool]byte{true: 't', false: 'T'}[c == 'x']
		}
		b.WriteByte(c)
	}
	return fmt.Sprintf("%s (%04o)", b.String(), mode&0o7777)
}

// maxLinks bounds the symlinks followed resolving one path, as the kernel
// does (ELOOP after 40).
const maxLinks = 40

// checkPath checks, with checkTrusted, every directory the lookup of the
// host path p inside r goes through: the host's /, each directory a name
// is looked up in, the directories symlinks on the way lead to, and p
// itself. The lookup follows symlinks inside the host root as rootfs
// does. It stops, without an error, at the first name missing (the
// installer creates it, in a directory just checked, and checks again:
// recheck) or not a directory (the caller reports it).
func checkPath(r *rootfs.Root, p string) error {
	euid := os.Geteuid()
	// check checks the directory fd; sticky reports that it is a sticky
	// directory let through as a parent (stickyParent), in which the next
	// name looked up must be a trusted owner's.
	check := func(fd int, hostPath string, final bool) (sticky bool, err error) {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return false, &os.PathError{Op: "stat", Path: hostPath, Err: err}
		}
		info := dirInfo{uid: st.Uid, gid: st.Gid, mode: st.Mode}
		if err := checkTrusted(hostPath, info, euid); err != nil {
			if !final && stickyParent(info, euid) {
				return true, nil
			}
			return false, err
		}
		return false, nil
	}
	rootSticky, err := check(r.Fd(), "/", p == "/")
	if err != nil {
		return err
	}
	// stack holds the directories walked so far, the host root first.
	type dir struct {
		fd     int
		path   string
		sticky bool
	}
	stack := []dir{{fd: r.Fd(), path: "/", sticky: rootSticky}}
	defer func() {
		for _, d := range stack[1:] {
			_ = unix.Close(d.fd)
		}
	}()
	pop := func() {
		if len(stack) > 1 {
			_ = unix.Close(stack[len(stack)-1].fd)
			stack = stack[:len(stack)-1]
		}
	}
	rest := components(p)
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == ".." {
			pop()
			continue
		}
		cur := stack[len(stack)-1]
		hostPath := path.Join(cur.path, name)
		var st unix.Stat_t
		err := unix.Fstatat(cur.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return &os.PathError{Op: "lstat", Path: hostPath, Err: err}
		}
		if cur.sticky && !trustedOwner(st.Uid, euid) {
			return fmt.Errorf("%s (owner %d:%d) in the sticky directory %s: %w: its owner can replace it, and so what xpu-cdi install writes below it; remove it or give another path", hostPath, st.Uid, st.Gid, cur.path, ErrUntrustedDir)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			links++
			if links > maxLinks {
				return &os.PathError{Op: "resolve", Path: p, Err: unix.ELOOP}
			}
			target, err := readlinkAt(cur.fd, name, hostPath)
			if err != nil {
				return err
			}
			if path.IsAbs(target) {
				for len(stack) > 1 {
					pop()
				}
			}
			rest = append(components(target), rest...)
			continue
		case unix.S_IFDIR:
		default:
			return nil
		}
		fd, err := unix.Openat(cur.fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: hostPath, Err: err}
		}
		sticky, err := check(fd, hostPath, len(rest) == 0)
		stack = append(stack, dir{fd: fd, path: hostPath, sticky: sticky})
		if err != nil {
			return err
		}
	}
	return nil
}

// components splits p into its names, without empty ones and ".", so that
// the last one is the last directory of the path.
func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func readlinkAt(dirfd int, name, hostPath string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: hostPath, Err: err}
	}
	return string(buf[:n]), nil
}

// checkDirs checks the directories the installer writes to (the hook
// directory, the spec's and the labels file's) and their parents, before
// anything is written.
func (in *Installer) checkDirs() error {
	dirs := []struct{ what, p string }{
		{"hook directory", in.o.HookDir},
		{"CDI spec directory", path.Dir(in.o.SpecPath)},
	}
	if in.o.LabelsFile != "" {
		dirs = append(dirs, struct{ what, p string }{"labels directory", path.Dir(in.o.LabelsFile)})
	}
	for _, d := range dirs {
		if err := checkPath(in.root, d.p); err != nil {
			return fmt.Errorf("%s %s: %w", d.what, in.onHost(d.p), err)
		}
	}
	return nil
}

// mkdirRoot creates the directory name in parent 0755 and owned by
// root:root (when the installer runs as root), whatever the umask and a
// setgid parent would make of it.
func mkdirRoot(parent *os.File, name, hostPath string) error {
	if err := unix.Mkdirat(int(parent.Fd()), name, 0o700); err != nil {
		return &os.PathError{Op: "mkdirat", Path: hostPath, Err: err}
	}
	fd, err := unix.Openat(int(parent.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: hostPath, Err: err}
	}
	defer func() { _ = unix.Close(fd) }()
	if os.Geteuid() == 0 {
		if err := unix.Fchown(fd, 0, 0); err != nil {
			return &os.PathError{Op: "chown", Path: hostPath, Err: err}
		}
	}
	if err := unix.Fchmod(fd, 0o755); err != nil {
		return &os.PathError{Op: "chmod", Path: hostPath, Err: err}
	}
	return nil
}
