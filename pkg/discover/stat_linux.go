package discover

import (
	"os"

	"golang.org/x/sys/unix"
)

// statNode is the NodeStater of a real host: lstat(2). A symlink is not
// followed: /dev/xpuN -> /dev/kvm must not become an XPU of the spec.
type statNode struct{}

var _ NodeStater = statNode{}

func (statNode) StatNode(hostPath string) (NodeInfo, error) {
	var st unix.Stat_t
	if err := unix.Lstat(hostPath, &st); err != nil {
		return NodeInfo{}, &os.PathError{Op: "lstat", Path: hostPath, Err: err}
	}
	return NodeInfo{
		Symlink: st.Mode&unix.S_IFMT == unix.S_IFLNK,
		Char:    st.Mode&unix.S_IFMT == unix.S_IFCHR,
		Major:   unix.Major(st.Rdev),
		Minor:   unix.Minor(st.Rdev),
		Mode:    os.FileMode(st.Mode & 0o777),
		UID:     st.Uid,
		GID:     st.Gid,
	}, nil
}
