package fakehost

import (
	"fmt"
	"os"
	"sort"
)

// recordDevices fills Tree.Devices from the host description, sorted by index.
func (b *builder) recordDevices() {
	h := b.h
	vfs := map[string][]int{}
	for _, d := range h.Devices {
		if d.Function == FunctionVF {
			vfs[d.PhysFn] = append(vfs[d.PhysFn], d.Index)
		}
	}
	for _, d := range h.Devices {
		td := TreeDevice{
			Index: d.Index, Path: fmt.Sprintf("/dev/xpu%d", d.Index), Major: h.Major, Minor: d.Minor,
			BDF: d.BDF, Serial: d.Serial, Model: d.Model, Family: d.Family, DeviceName: d.DeviceName,
			DeviceID: d.DeviceID, Function: d.Function, Parent: d.PhysFn, NUMANode: d.NUMANode, State: d.State,
			HasNode:  !h.NoNodes && !d.NoNode,
			HasProc:  !h.NoProcfs && !d.NoProc && !h.XRE5(),
			HasSysfs: !h.NoSysfs && !d.NoSysfs && h.nodeClass() != "",
		}
		if d.Function == FunctionPF {
			td.VFs = vfs[d.BDF]
		}
		if td.HasSysfs {
			td.SysfsPath = fmt.Sprintf("%s/%s/xpu%d", pciDir(d), h.nodeClass(), d.Index)
			if h.SysDevChar {
				td.DevChar = devCharPath(h.Major, d.Minor)
			}
		}
		b.t.Devices = append(b.t.Devices, td)
	}
	sort.Slice(b.t.Devices, func(i, j int) bool { return b.t.Devices[i].Index < b.t.Devices[j].Index })
}

// buildNodes creates /dev/xpuN and /dev/xpuctrl.
func (b *builder) buildNodes() error {
	b.recordDevices()
	if err := b.mkdir("/dev"); err != nil {
		return err
	}
	if b.h.NoNodes {
		return nil
	}
	b.t.RealNodes = !b.o.noMknod && os.Geteuid() == 0
	for _, d := range b.t.Devices {
		if !d.HasNode {
			continue
		}
		if err := b.node(d.Path, d.Minor); err != nil {
			return err
		}
	}
	if !b.h.NoCtrl {
		if err := b.node("/dev/xpuctrl", b.h.ctrlMinor()); err != nil {
			return err
		}
		b.t.Ctrl = "/dev/xpuctrl"
	}
	return nil
}

// node creates one device node, as a real char device when RealNodes and as
// an empty regular file otherwise, and records its facts. If the kernel
// refuses the first mknod (no CAP_MKNOD, user namespace), the whole tree
// falls back to regular files.
func (b *builder) node(p string, minor uint32) error {
	facts := NodeFacts{Major: b.h.Major, Minor: minor, Mode: b.h.NodeMode.Perm(), UID: b.h.NodeUID, GID: b.h.NodeGID}
	if b.dry {
		b.record(p)
		return nil
	}
	full := b.full(p)
	first := len(b.t.facts) == 0
	b.t.facts[full] = facts
	if b.t.RealNodes {
		err := mknodChar(full, facts)
		if err == nil {
			b.record(p)
			return nil
		}
		if !first || !isPermission(err) {
			return err
		}
		b.o.log.Warnf("mknod refused (%v): device nodes of %s are regular files", err, b.root)
		b.t.RealNodes = false
	}
	return b.writeFile(p, nil, facts.Mode)
}
