package xpunode

import (
	"fmt"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// SpecChecker reads the CDI spec directories as engines do (the CDI
// library's cache) to tell which devices of the kind a container could get.
type SpecChecker struct {
	kind   string
	vendor string
	cache  *cdiapi.Cache
}

// NewSpecChecker returns a checker of the specs of kind (vendor/class) in dirs.
func NewSpecChecker(kind string, dirs []string) *SpecChecker {
	vendor, _, _ := strings.Cut(kind, "/")
	// NewCache fails only on a refresh error, which check reports again.
	cache, _ := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	return &SpecChecker{kind: kind, vendor: vendor, cache: cache}
}

// Check returns the device names of the kind the specs offer, where those
// specs do not match the host h (see StaleNodes) and the errors of specs the
// library rejected.
func (s *SpecChecker) Check(h *discover.Host) (names map[string]bool, stale []string, err error) {
	err = s.cache.Refresh()
	names = map[string]bool{}
	for _, q := range s.cache.ListDevices() {
		if name, ok := strings.CutPrefix(q, s.kind+"="); ok {
			names[name] = true
		}
	}
	for _, spec := range s.cache.GetVendorSpecs(s.vendor) {
		if spec.GetVendor()+"/"+spec.GetClass() != s.kind {
			continue
		}
		for _, p := range StaleNodes(spec.Spec, h) {
			stale = append(stale, spec.GetPath()+": "+p)
		}
	}
	return names, stale, err
}

// StaleNodes compares the XPU device nodes of a spec with what discovery
// found: a node whose major:minor changed (the driver was reloaded) or that
// the host no longer has. It compares with discovery rather than stat'ing
// the spec's host paths because the plugin usually runs in a container where
// the host's /dev is mounted under --dev-root, not at /dev.
func StaleNodes(spec *specs.Spec, h *discover.Host) []string {
	live := map[string]*discover.Node{}
	if h.Control != nil {
		live[h.Control.Path] = h.Control
	}
	for _, d := range h.Devices {
		live[d.Node.Path] = &d.Node
	}
	var problems []string
	seen := map[string]bool{}
	check := func(e *specs.ContainerEdits) {
		for _, n := range e.DeviceNodes {
			if !strings.HasPrefix(n.Path, "/dev/xpu") || seen[n.Path] {
				continue
			}
			seen[n.Path] = true
			node, ok := live[n.Path]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s is not on this host any more", n.Path))
			case (n.Major != 0 || n.Minor != 0) && (n.Major != int64(node.Major) || n.Minor != int64(node.Minor)):
				problems = append(problems, fmt.Sprintf("%s is %d:%d on this host but the spec says %d:%d (the driver was reloaded?)", n.Path, node.Major, node.Minor, n.Major, n.Minor))
			}
		}
	}
	check(&spec.ContainerEdits)
	for i := range spec.Devices {
		check(&spec.Devices[i].ContainerEdits)
	}
	return problems
}
