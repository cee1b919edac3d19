package xpunode

import (
	"errors"
	"fmt"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/parser"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// SpecChecker reads the CDI spec directories as engines do (the CDI
// library's cache, as cdicompat.ResolveSpecs mirrors it) to tell which
// devices of the kind a container could get. The files are read bounded
// and without blocking (cdicompat.ReadSpecFiles): a FIFO or a link to a
// device in a spec directory is an error of that file, not a hang.
type SpecChecker struct {
	kind string
	dirs []string
}

// NewSpecChecker returns a checker of the specs of kind (vendor/class) in dirs.
func NewSpecChecker(kind string, dirs []string) *SpecChecker {
	return &SpecChecker{kind: kind, dirs: cdicompat.SpecDirs(dirs)}
}

// Check returns the device names of the kind the specs offer, where those
// specs do not match the host h (see StaleNodes) and the errors of specs the
// library rejected.
func (s *SpecChecker) Check(h *discover.Host) (names map[string]bool, stale []string, err error) {
	files, err := cdicompat.ReadSpecFiles(s.dirs)
	specs := cdicompat.ResolveSpecs(files)
	err = errors.Join(err, specs.Err())
	names = map[string]bool{}
	for _, q := range specs.ListDevices() {
		if name, ok := strings.CutPrefix(q, s.kind+"="); ok {
			names[name] = true
		}
	}
	for _, spec := range specs.Specs {
		if spec.Vendor+"/"+spec.Class != s.kind {
			continue
		}
		for _, p := range StaleNodes(spec.Spec, h) {
			stale = append(stale, spec.Path+": "+p)
		}
	}
	return names, stale, err
}

// StaleNodes compares the XPU device nodes of a spec with what discovery
// found (cdispec.StaleNodes): a node whose major:minor changed (the driver was reloaded) or that
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
	return cdispec.StaleNodes(spec, func(n *specs.DeviceNode) (string, int64, int64, error) {
		if !strings.HasPrefix(n.Path, "/dev/xpu") {
			return "", 0, 0, nil
		}
		node, ok := live[n.Path]
		if !ok {
			return n.Path, 0, 0, errNotOnHost
		}
		return n.Path, int64(node.Major), int64(node.Minor), nil
	})
}

// errNotOnHost is the lookup error of a spec node discovery did not find.
var errNotOnHost = errors.New("not on this host any more")

// SpecHint is the command that writes the node spec of kind (vendor/class)
// where the device plugin and the DRA driver look for it: what their
// messages about a missing or stale spec tell the admin to run.
func SpecHint(kind string) string {
	if kind == cdispec.DefaultKind {
		return "xpu-cdi generate --output " + cdispec.DefaultSpecPath
	}
	vendor, class := parser.ParseQualifier(kind)
	return fmt.Sprintf("xpu-cdi generate --vendor %s --class %s --output %s", vendor, class, cdispec.SpecPath(kind))
}
