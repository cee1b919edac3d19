package cdispec

import (
	"errors"
	"fmt"
	"sort"
	"strconv"

	"tags.cncf.io/container-device-interface/pkg/parser"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// AllDevice is the name of the device that stands for every compute device.
const AllDevice = "all"

// New builds the CDI spec of a discovered host as s describes it. Warnings
// are things left out (names that are not unique, ...); they do not make
// the spec invalid.
func New(host *discover.Host, s Settings) (*specs.Spec, []string, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if err := host.CheckUsable(); err != nil {
		return nil, nil, err
	}
	compute := host.ComputeDevices()
	named, warnings := deviceNames(host, compute, s.NameStrategies)

	spec := &specs.Spec{Kind: Kind(s.Vendor, s.Class)}
	for _, n := range named {
		spec.Devices = append(spec.Devices, specs.Device{Name: n.name, ContainerEdits: deviceEdits(n.dev)})
	}
	if !s.NoAllDevice {
		spec.Devices = append(spec.Devices, specs.Device{Name: AllDevice, ContainerEdits: deviceEdits(compute...)})
	}

	if len(spec.Devices) == 0 {
		return nil, nil, fmt.Errorf("%w: no name strategy produced a name and the all device is disabled", ErrNoSpecDevices)
	}

	common := specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{deviceNode(host.Control)}}
	if !s.NodesOnly {
		common.Mounts = append(common.Mounts, fileMounts(host.Libraries)...)
	}
	common.Mounts = append(common.Mounts, fileMounts(host.Tools)...)
	sort.SliceStable(common.Mounts, func(i, j int) bool { return common.Mounts[i].ContainerPath < common.Mounts[j].ContainerPath })
	if !s.NodesOnly && !s.NoHooks {
		if h := runtimeHook(s.HookPath, host.Libraries); h != nil {
			common.Hooks = append(common.Hooks, h)
		}
	}
	spec.ContainerEdits = common
	if s.HostRoot != "" {
		if err := transformRoot(spec, s.HostRoot); err != nil {
			return nil, nil, err
		}
	}

	v, err := specs.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("determining the CDI version of the spec: %w", err)
	}
	spec.Version = v
	return spec, warnings, nil
}

type namedDevice struct {
	name string
	dev  *discover.Device
}

// deviceNames names each compute device under each strategy. Index names
// always exist; PCI-address and serial names only where they are unique on
// the whole host (K200 power domains share a PCI function, VFs may share
// the PF's serial) and valid CDI device names.
func deviceNames(host *discover.Host, compute []*discover.Device, strategies []NameStrategy) ([]namedDevice, []string) {
	var (
		out      []namedDevice
		warnings []string
		taken    = map[string]*discover.Device{AllDevice: nil}
	)
	count := func(key func(*discover.Device) string) map[string]int {
		c := map[string]int{}
		for _, d := range host.Devices {
			if k := key(d); k != "" {
				c[k]++
			}
		}
		return c
	}
	addrOf := func(d *discover.Device) string { return d.Address() }
	serialOf := func(d *discover.Device) string { return d.Serial }
	for _, s := range strategies {
		var (
			key    func(*discover.Device) string
			counts map[string]int
		)
		switch s {
		case NameByIndex:
			key = func(d *discover.Device) string { return strconv.Itoa(d.Index) }
		case NameByBDF:
			key, counts = addrOf, count(addrOf)
		case NameBySerial:
			key, counts = serialOf, count(serialOf)
		}
		for _, d := range compute {
			name := key(d)
			switch {
			case name == "":
				continue
			case counts != nil && counts[name] > 1:
				warnings = append(warnings, fmt.Sprintf("/dev/xpu%d: %s name %q is shared by %d devices; not used", d.Index, s, name, counts[name]))
				continue
			}
			if err := parser.ValidateDeviceName(name); err != nil {
				warnings = append(warnings, fmt.Sprintf("/dev/xpu%d: %s name %q is not a valid CDI device name (%v); not used", d.Index, s, name, err))
				continue
			}
			if other, dup := taken[name]; dup {
				if other != d {
					warnings = append(warnings, fmt.Sprintf("/dev/xpu%d: %s name %q is already used by another device; not used", d.Index, s, name))
				}
				continue
			}
			taken[name] = d
			out = append(out, namedDevice{name: name, dev: d})
		}
	}
	return out, warnings
}

// ErrNoSpecDevices is returned when a spec would have no device at all.
var ErrNoSpecDevices = errors.New("the spec has no device")
