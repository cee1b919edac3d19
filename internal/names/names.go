package names

import (
	"regexp"
	"strconv"
	"strings"
)

// The default names. Each flag that can change one (--resource-name,
// --dra-driver-name, --vendor, --class) defaults to it.
const (
	// ResourceName is the device plugin's extended resource.
	ResourceName = "baidu.com/xpu"
	// DRADriver is the DRA driver's name: the ResourceSlices' driver and
	// the domain of the devices' attributes.
	DRADriver = "xpu.baidu.com"
	// CDIVendor and CDIClass make the CDI kind, CDIKind.
	CDIVendor = "baidu.com"
	CDIClass  = "xpu"
	CDIKind   = CDIVendor + "/" + CDIClass
	// LabelPrefix is the namespace and common part of the node labels
	// (baidu.com/xpu.present); the partition-count labels follow the
	// resource name instead (PartitionCountLabel).
	LabelPrefix = "baidu.com/xpu."
)

// ReplicaSeparator joins the ID of an XPU and a replica number in the
// device plugin's device IDs when XPUs are time-sliced: 3::1.
const ReplicaSeparator = "::"

// DRADevicePrefix starts the name of the DRA device of /dev/xpuN in the
// DRA driver's ResourceSlice: xpu-N (DRADevice).
const DRADevicePrefix = "xpu-"

// DRADevice is the name of the device of /dev/xpuN in the DRA driver's
// ResourceSlice: xpu-N.
func DRADevice(index int) string { return DRADevicePrefix + strconv.Itoa(index) }

// DRACardDevice is the name of a whole card in the DRA driver's dynamic
// partition mode: xpu-N, N the card's place in PCI address order among
// the node's cards (not a /dev/xpuN), which neither a re-layout nor a new
// numbering of the nodes at boot changes.
func DRACardDevice(card int) string { return DRADevicePrefix + strconv.Itoa(card) }

// DRASlotDevice is the name of VF slot (0-based) of card (as
// DRACardDevice) cut into count VFs: xpu-3-h1 (halves), xpu-3-q2
// (quarters), xpu-3-v3-0 for a count without a short name.
func DRASlotDevice(card, count, slot int) string {
	switch count {
	case 2:
		return DRACardDevice(card) + "-h" + strconv.Itoa(slot)
	case 4:
		return DRACardDevice(card) + "-q" + strconv.Itoa(slot)
	}
	return DRACardDevice(card) + "-v" + strconv.Itoa(count) + "-" + strconv.Itoa(slot)
}

// ParseDRAPartitionDevice reads a name of DRACardDevice (count 0) or
// DRASlotDevice; false for any other name.
func ParseDRAPartitionDevice(name string) (card, count, slot int, ok bool) {
	rest, found := strings.CutPrefix(name, DRADevicePrefix)
	if !found {
		return 0, 0, 0, false
	}
	parts := strings.Split(rest, "-")
	num := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0 && s == strconv.Itoa(n)
	}
	card, ok = num(parts[0])
	if !ok {
		return 0, 0, 0, false
	}
	switch {
	case len(parts) == 1:
		return card, 0, 0, true
	case len(parts) == 2 && len(parts[1]) > 1 && (parts[1][0] == 'h' || parts[1][0] == 'q'):
		count = 2
		if parts[1][0] == 'q' {
			count = 4
		}
		slot, ok = num(parts[1][1:])
	case len(parts) == 3 && len(parts[1]) > 1 && parts[1][0] == 'v':
		if count, ok = num(parts[1][1:]); ok {
			slot, ok = num(parts[2])
		}
	default:
		return 0, 0, 0, false
	}
	if !ok || slot >= count || DRASlotDevice(card, count, slot) != name {
		return 0, 0, 0, false
	}
	return card, count, slot, true
}

// PartitionSizeName is the short name of a partition size, as resource
// names, labels and DeviceClasses carry it: 49152 MiB is "48gb", 5120 MiB
// "5gb" (GiB, written gb as the vendor's and HAMi's names do); "" for 0.
func PartitionSizeName(memoryMiB int64) string {
	if memoryMiB <= 0 {
		return ""
	}
	if memoryMiB%1024 == 0 {
		return strconv.FormatInt(memoryMiB/1024, 10) + "gb"
	}
	return strconv.FormatInt(memoryMiB, 10) + "mb"
}

// PartitionFraction is the share of its card one of n partitions is,
// "1/n" (the DRA attribute partition, `xpu-cdi partition show`); "" for
// n <= 0.
func PartitionFraction(n int) string {
	if n <= 0 {
		return ""
	}
	return "1/" + strconv.Itoa(n)
}

// PartitionResource is the device plugin's resource of the partitions of
// memoryMiB under the mixed strategy: resource, "-" and the size name
// (baidu.com/xpu-24gb for baidu.com/xpu).
func PartitionResource(resource string, memoryMiB int64) string {
	return resource + "-" + PartitionSizeName(memoryMiB)
}

// partitionSuffix is what PartitionResource adds to the resource name.
var partitionSuffix = regexp.MustCompile(`^-[1-9][0-9]*(gb|mb)$`)

// IsPartitionResource reports whether name is PartitionResource of
// resource and some size (baidu.com/xpu-24gb for baidu.com/xpu).
func IsPartitionResource(resource, name string) bool {
	rest, ok := strings.CutPrefix(name, resource)
	return ok && partitionSuffix.MatchString(rest)
}

// PartitionCountLabel is the node label counting the partitions of a size
// (as PartitionSizeName writes it, "24gb") for the device plugin's
// resource: the partition resource's name plus ".count",
// baidu.com/xpu-24gb.count for baidu.com/xpu.
func PartitionCountLabel(resource, size string) string {
	return resource + "-" + size + ".count"
}

// PodResourcesSocket is the kubelet's PodResources socket, as the kubelet
// names it below its default root directory /var/lib/kubelet.
const PodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
