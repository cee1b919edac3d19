package discover

import (
	"fmt"
	"strings"
)

// pciSeen is what the node-to-PCI sources learn about the host as a whole,
// for mergeSource, which runs after them: which of the sources the host
// lacks entirely, and the bound functions no node led to. Discover hands
// one to each of them; it is nobody's private state on the Host.
type pciSeen struct {
	// noProcXPU, noClassXPU and noDevChar record that /proc/xpu,
	// /sys/class/xpu and /sys/dev/char are absent on the whole host
	// (procSource, classSource, devCharSource).
	noProcXPU, noClassXPU, noDevChar bool
	// boundNoNode are the PCI functions the kunlun driver binds that no
	// device was mapped to (bindingSource; sorted; only without
	// WithIndices).
	boundNoNode []string
}

// mergeSource runs after every source that maps a node to its PCI
// function: it names the models (a VF's from its PF's), compares the
// procfs address with the one sysfs led to, and, on a host where no source
// could map any node, says so once.
type mergeSource struct {
	sys  *sysfs
	seen *pciSeen
}

var _ source = (*mergeSource)(nil)

// newMergeSource returns the last of the PCI sources; seen is what the
// sources before it recorded.
func newMergeSource(sys *sysfs, seen *pciSeen) source {
	return &mergeSource{sys: sys, seen: seen}
}

func (s *mergeSource) Discover(h *Host) error {
	pfs := map[string]parentPF{} // PF address -> its model and VF count, for VFs
	for _, d := range h.Devices {
		if d.PCI != nil && d.PCI.Function == FunctionPF {
			d.Model = modelFor(d.PCI, d.ProcDeviceName, "")
			pfs[d.PCI.Address] = parentPF{model: d.Model, numVFs: d.PCI.NumVFs}
		}
	}
	for _, d := range h.Devices {
		switch {
		case d.PCI == nil:
			d.Model = modelFor(nil, d.ProcDeviceName, "")
		case d.PCI.Function == FunctionVF:
			parent, ok := pfs[d.PCI.Parent]
			if !ok {
				parent = s.sys.parentPF(d.PCI.Parent)
				pfs[d.PCI.Parent] = parent
			}
			d.Model = modelFor(d.PCI, d.ProcDeviceName, parent.model)
			d.PCI.ParentNumVFs = parent.numVFs
		case d.PCI.Function != FunctionPF:
			d.Model = modelFor(d.PCI, d.ProcDeviceName, "")
		}
		if d.PCI != nil && d.ProcAddress != "" && d.ProcAddress != d.PCI.Address {
			d.problemf("procfs says PCI address %s, sysfs says %s", d.ProcAddress, d.PCI.Address)
		}
	}
	// Where some source exists, a device it could not map has a problem
	// saying why; where none does, one note for the host.
	seen := s.seen
	if seen.noProcXPU && seen.noClassXPU && seen.noDevChar && len(h.Devices) > 0 {
		bound := ""
		if len(seen.boundNoNode) > 0 {
			bound = fmt.Sprintf(" (the kunlun driver binds %d PCI functions, %s, but nothing says which node is whose)", len(seen.boundNoNode), strings.Join(seen.boundNoNode, ", "))
		}
		h.notef("no PCI address for %s: none of /proc/xpu/devN/info, /sys/class/xpu/xpuN and /sys/dev/char/MAJ:MIN exists to map a node to its PCI function%s, and xpu-cdi does not guess one; the devices are named by index only",
			nodeList(h.Devices), bound)
	}
	return nil
}
