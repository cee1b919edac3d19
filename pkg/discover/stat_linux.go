package discover

import (
	"os"

	"golang.org/x/sys/unix"
)

// statNode is the NodeStater of a real host: stat(2), following symlinks
// the way a runtime opening the node does.
type statNode struct{}

var _ NodeStater = statNode{}

func (statNode) StatNode(hostPath string) (NodeInfo, error) {
	var st unix.Stat_t
	if err := unix.Stat(hostPath, &st); err != nil {
		return NodeInfo{}, &os.PathError{Op: "stat", Path: hostPath, Err: err}
	}
	return NodeInfo{
		Char:  st.Mode&unix.S_IFMT == unix.S_IFCHR,
		Major: unix.Major(st.Rdev),
		Minor: unix.Minor(st.Rdev),
		Mode:  os.FileMode(st.Mode & 0o777),
		UID:   st.Uid,
		GID:   st.Gid,
	}, nil
}
