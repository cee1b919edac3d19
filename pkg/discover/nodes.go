package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// NodeInfo is what the kernel says about a device node.
type NodeInfo struct {
	Char  bool
	Major uint32
	Minor uint32
	// Mode holds the permission bits only.
	Mode os.FileMode
	UID  uint32
	GID  uint32
}

// NodeStater reports the kernel facts of a device node at a host path.
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
}

var _ Source = (*nodeSource)(nil)

// NewNodeSource returns the Source that creates the host's devices from the
// /dev/xpuN nodes under devRoot.
func NewNodeSource(devRoot string, stater NodeStater) Source {
	return &nodeSource{devRoot: devRoot, stater: stater}
}

// ParseNodeName returns N for "xpuN" in canonical decimal form.
func ParseNodeName(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, nodePrefix)
	if !ok || digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n > 1<<20 {
		return 0, false
	}
	return n, true
}

func (s *nodeSource) Discover(h *Host) error {
	devDir := filepath.Join(s.devRoot, "dev")
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

func (s *nodeSource) node(name string) (*Node, error) {
	containerPath := path.Join("/dev", name)
	hostPath := filepath.Join(s.devRoot, containerPath)
	info, err := s.stater.StatNode(hostPath)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", hostPath, err)
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
