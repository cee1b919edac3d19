package dra

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Attribute names in the driver's domain (a CEL selector reads them as
// device.attributes["xpu.baidu.com"].model). The PCI and NUMA attributes
// are the standard resource.kubernetes.io ones, so that matchAttribute can
// align XPUs with NICs of other drivers.
const (
	AttrIndex       = "index"
	AttrModel       = "model"
	AttrFamily      = "family"
	AttrSRIOVRole   = "sriovRole"
	AttrParentBusID = "parentPCIBusID"
	// AttrPartition is the share of its card an SR-IOV partition (VF) is:
	// "1/2", "1/4" (names.PartitionFraction of the PF's VF count). A
	// whole card has none.
	AttrPartition     = "partition"
	AttrSerial        = "serial"
	AttrDriverVersion = "driverVersion"
	AttrXREVersion    = "xreVersion"
	AttrFirmware      = "firmwareVersion"
	CapacityMemory    = "memory"
)

// ValidateDriverName checks a DRA driver name: a lower-case DNS subdomain
// of at most 63 characters (it is also the domain of the attributes).
func ValidateDriverName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("driver name %q: %s", name, strings.Join(errs, "; "))
	}
	if len(name) > 63 {
		return fmt.Errorf("driver name %q is longer than 63 characters", name)
	}
	return nil
}

var versionDigits = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?((?:\.\d+)*)$`)

// SemVer maps a Kunlun version to semantic versioning for a version-typed
// attribute: 4.33.0 stays, 4.33 becomes 4.33.0, and the fourth (build)
// number of the 5.x releases, 5.0.21.47, becomes build metadata:
// 5.0.21+47. Semver ignores build metadata in comparisons, so a selector
// can compare releases (>= 5.0.21) but not builds of one release; the
// string attribute ...VersionFull keeps the whole text. Leading zeros are
// dropped (0001.0000.0020 is 1.0.20). It reports false for what is not a
// dotted number. Kept by hand: semver libraries parse strict versions,
// while this maps the vendor's dotted forms to one (FuzzSemVer checks the
// result against blang/semver).
func SemVer(v string) (string, bool) {
	m := versionDigits.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return "", false
	}
	num := func(s string) string {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return "0"
		}
		return strconv.FormatUint(n, 10)
	}
	patch := "0"
	if m[3] != "" {
		patch = num(m[3])
	}
	out := num(m[1]) + "." + num(m[2]) + "." + patch
	if m[4] != "" {
		parts := strings.Split(strings.TrimPrefix(m[4], "."), ".")
		for i := range parts {
			parts[i] = num(parts[i])
		}
		out += "+" + strings.Join(parts, ".")
	}
	return out, true
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

// attributeString bounds a string attribute value (the API takes 64 bytes).
func attributeString(s string) string {
	if len(s) > resourceapi.DeviceAttributeMaxValueLength {
		return s[:resourceapi.DeviceAttributeMaxValueLength]
	}
	return s
}

// versionAttrs sets name (version-typed) and nameFull (the text) for v.
func versionAttrs(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name, v string) {
	if v == "" {
		return
	}
	if sv, ok := SemVer(v); ok {
		attrs[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{VersionValue: &sv}
	}
	attrs[resourceapi.QualifiedName(name+"Full")] = str(attributeString(v))
}

// apiDevice converts one device of the node model into a ResourceSlice
// device: its facts (dev.Facts, the ones the node labels use too) and its
// PCI placement. Every PCI fact comes from discovery, which read the sysfs
// below the dev root, not the real /sys, so that a driver in a container
// (host /sys under --dev-root) or on a fake host tells the truth. A fact
// the host does not tell is left out, not guessed.
func apiDevice(dev xpunode.Device) resourceapi.Device {
	d, f := dev.XPU, dev.Facts
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	idx := int64(dev.Index)
	attrs[AttrIndex] = resourceapi.DeviceAttribute{IntValue: &idx}
	attrs[AttrModel] = str(attributeString(f.Model))
	if f.Generation != "" {
		attrs[AttrFamily] = str(f.Generation)
	}
	if f.Serial != "" {
		attrs[AttrSerial] = str(attributeString(f.Serial))
	}
	versionAttrs(attrs, AttrDriverVersion, f.DriverVersion)
	versionAttrs(attrs, AttrXREVersion, f.XREVersion)
	versionAttrs(attrs, AttrFirmware, f.FirmwareVersion)
	if dev.NUMANode >= 0 {
		if a, err := deviceattribute.GetNUMANodeAttribute(dev.NUMANode, deviceattribute.ScalarAttribute); err == nil {
			attrs[a.Name] = a.Value
		}
	}
	if d.PCI != nil {
		attrs[AttrSRIOVRole] = str(string(d.PCI.Function))
		if d.PCI.Parent != "" {
			attrs[AttrParentBusID] = str(d.PCI.Parent)
		}
		if d.PCI.Function == discover.FunctionVF {
			if frac := names.PartitionFraction(d.PCI.ParentNumVFs); frac != "" {
				attrs[AttrPartition] = str(frac)
			}
		}
	}
	if addr := d.Address(); addr != "" {
		if a, err := deviceattribute.GetPCIBusIDAttribute(addr); err == nil {
			attrs[a.Name] = a.Value
		}
	}
	if d.PCI != nil && d.PCI.PCIeRoot != "" {
		// Discovery found the root complex on the device's own resolved
		// sysfs path (links kept inside the dev root), in the form the
		// library's GetPCIeRootAttributeByPCIBusID gives.
		attrs[deviceattribute.StandardDeviceAttributePCIeRoot] = str(d.PCI.PCIeRoot)
	}
	out := resourceapi.Device{Name: names.DRADevice(dev.Index), Attributes: attrs}
	if f.MemoryMiB > 0 {
		out.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			CapacityMemory: {Value: *resource.NewQuantity(f.MemoryMiB<<20, resource.BinarySI)},
		}
	}
	return out
}
