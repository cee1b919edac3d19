package fakehost

import (
	"os"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// DiscoverOptions returns the discover options that read this tree: both
// roots, and, when the nodes are plain files (not root, or WithoutMknod),
// a NodeStater answering with the facts the nodes stand for.
func (t *Tree) DiscoverOptions() []discover.Option {
	opts := []discover.Option{discover.WithDevRoot(t.Root), discover.WithDriverRoot(t.Root)}
	if !t.RealNodes {
		opts = append(opts, discover.WithNodeStater(t.NodeStater()))
	}
	return opts
}

// NodeStater answers stat for the tree's nodes with the facts they stand
// for, real nodes or not (the kernel-facts seam of package discover).
func (t *Tree) NodeStater() discover.NodeStater { return treeStater{t} }

// treeStater is the kernel-facts seam for trees without real nodes.
type treeStater struct{ t *Tree }

var _ discover.NodeStater = treeStater{}

func (s treeStater) StatNode(hostPath string) (discover.NodeInfo, error) {
	// As lstat: a link planted in place of a node is a link.
	if st, err := os.Lstat(hostPath); err == nil && st.Mode()&os.ModeSymlink != 0 {
		return discover.NodeInfo{Symlink: true}, nil
	}
	f, ok := s.t.NodeFacts(hostPath)
	if !ok {
		return discover.NodeInfo{}, &os.PathError{Op: "stat", Path: hostPath, Err: os.ErrNotExist}
	}
	return discover.NodeInfo{Char: true, Major: f.Major, Minor: f.Minor, Mode: f.Mode, UID: f.UID, GID: f.GID}, nil
}
