package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// NodeInfo is what the kernel says about a device node.
type NodeInfo struct {
	// Symlink: the path is a symlink (not followed; never a node).
	Symlink bool
	Char    bool
	Major   uint32
	Minor   uint32
	// Mode holds the permission bits only.
	Mode os.FileMode
	UID  uint32
	GID  uint32
}

// NodeStater reports the kernel facts of a device node at a host path,
// without following a symlink there (lstat).
type NodeStater interface {
	StatNode(hostPath string) (NodeInfo, error)
}

const (
	nodePrefix  = "xpu"
	controlName = "xpuctrl"
)

// nodeSource finds /dev/xpuN and /dev/xpuctrl.
type nodeSource struct {
	devRoot string
	stater  NodeStater
	// indices, when not nil, are the only N of /dev/xpuN looked at.
	indices []int
}

var _ source = (*nodeSource)(nil)

// newNodeSource returns the Source that creates the host's devices from the
// /dev/xpuN nodes under devRoot.
func newNodeSource(devRoot string, stater NodeStater) source {
	return &nodeSource{devRoot: devRoot, stater: stater}
}

// newIndexedNodeSource is newNodeSource for the /dev/xpuN nodes of the given
// indices only: it stats those nodes and /dev/xpuctrl by name instead of
// listing /dev. A device whose node does not exist is left out, as
// newNodeSource leaves it out; negative indices and indices that no node
// name can carry are ignored. The sources after it only add facts to the
// devices it created, so the whole discovery reads nothing of the others.
func newIndexedNodeSource(devRoot string, stater NodeStater, indices []int) source {
	sel := slices.Clone(indices)
	if sel == nil {
		sel = []int{}
	}
	slices.Sort(sel)
	return &nodeSource{devRoot: devRoot, stater: stater, indices: slices.Compact(sel)}
}

// ParseNodeName returns N for "xpuN" in canonical decimal form.
func ParseNodeName(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, nodePrefix)
	if !ok {
		return 0, false
	}
	return ParseIndex(digits)
}

// MaxIndex is the largest device index a node name can carry.
const MaxIndex = 1 << 20

// ParseIndex returns the device index s names in canonical decimal form
// (the N of /dev/xpuN, the spec's index names): digits only, no leading
// zero, at most MaxIndex.
func ParseIndex(s string) (int, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxIndex {
		return 0, false
	}
	return n, true
}

func (s *nodeSource) Discover(h *Host) error {
	devDir := filepath.Join(s.devRoot, "dev")
	if s.indices != nil {
		return s.discoverIndices(h, devDir)
	}
	entries, err := os.ReadDir(devDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w under %s: %s does not exist", ErrNoDevices, s.devRoot, devDir)
		}
		return fmt.Errorf("reading %s: %w", devDir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, nodePrefix) {
			continue
		}
		idx, isDevice := ParseNodeName(name)
		if !isDevice && name != controlName {
			continue
		}
		node, err := s.node(name)
		if err != nil {
			h.warnf("%v; ignored", err)
			continue
		}
		if !isDevice {
			h.Control = node
			continue
		}
		h.addDevice(&Device{Index: idx, Node: *node, Model: ModelUnknown, Compute: true})
	}
	sort.Slice(h.Devices, func(i, j int) bool { return h.Devices[i].Index < h.Devices[j].Index })
	if len(h.Devices) == 0 {
		return fmt.Errorf("%w under %s: no %s/xpuN device node", ErrNoDevices, s.devRoot, devDir)
	}
	return nil
}

// discoverIndices finds the nodes of s.indices and the control node by name.
// A name that is in /dev but cannot be stat'ed gets the warning a listing of
// /dev gives it; a name that is not in /dev is quietly absent.
func (s *nodeSource) discoverIndices(h *Host, devDir string) error {
	for _, idx := range s.indices {
		name := nodePrefix + strconv.Itoa(idx)
		if n, ok := ParseNodeName(name); !ok || n != idx {
			continue
		}
		if node, ok := s.namedNode(h, name); ok {
			h.addDevice(&Device{Index: idx, Node: *node, Model: ModelUnknown, Compute: true})
		}
	}
	if node, ok := s.namedNode(h, controlName); ok {
		h.Control = node
	}
	if len(h.Devices) == 0 {
		if _, err := os.Stat(devDir); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w under %s: %s does not exist", ErrNoDevices, s.devRoot, devDir)
		}
		asked := JoinIndices(s.indices)
		if asked == "" {
			asked = "(none asked)"
		}
		return fmt.Errorf("%w under %s: no %s/xpuN device node of index %s", ErrNoDevices, s.devRoot, devDir, asked)
	}
	return nil
}

// namedNode stats /dev/name. ok is false when there is no such node.
func (s *nodeSource) namedNode(h *Host, name string) (*Node, bool) {
	node, err := s.node(name)
	if err == nil {
		return node, true
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Only a name that is not there at all is what a listing of /dev
		// would not have met.
		if _, lerr := os.Lstat(filepath.Join(s.devRoot, "dev", name)); errors.Is(lerr, fs.ErrNotExist) {
			return nil, false
		}
	}
	h.warnf("%v; ignored", err)
	return nil, false
}

// ParseNodePath returns N for "/dev/xpuN", the path a device node has in
// the container (and in the spec), in canonical decimal form.
func ParseNodePath(p string) (int, bool) {
	name, ok := strings.CutPrefix(p, "/dev/")
	if !ok {
		return 0, false
	}
	return ParseNodeName(name)
}

// JoinIndices writes device indices the way XPU_VISIBLE_DEVICES lists them
// and messages quote them: "0,2,3".
func JoinIndices(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (s *nodeSource) node(name string) (*Node, error) {
	containerPath := path.Join("/dev", name)
	hostPath := filepath.Join(s.devRoot, containerPath)
	info, err := s.stater.StatNode(hostPath)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", hostPath, err)
	}
	if info.Symlink {
		return nil, fmt.Errorf("%s is a symlink, not the driver's device node (a link to another device, /dev/kvm say, is never offered as an XPU)", hostPath)
	}
	if !info.Char {
		return nil, fmt.Errorf("%s is not a character device", hostPath)
	}
	return &Node{
		Path:     containerPath,
		HostPath: hostPath,
		Major:    info.Major,
		Minor:    info.Minor,
		Mode:     info.Mode,
		UID:      info.UID,
		GID:      info.GID,
	}, nil
}
