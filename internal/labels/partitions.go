package labels

import (
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// PartitionLayout is the label of the node's current partition layout in
// its label form (partition.Layout.LabelValue: all=2,3=4 is all-2_3-4), on
// nodes with an SR-IOV-capable card. The chart's installer still reads it
// as the layout to apply on this node when PartitionLayoutRequest is not
// set, with a warning: its old name for the request, read for one more
// release.
const PartitionLayout = Prefix + "partition-layout"

// PartitionLayoutRequest is the label an admin sets on a Node to ask the
// chart's installer for that node's partition layout, in the layout's
// label form (docs/partitions.md, "Keeping a layout"). It is under
// node-restriction.kubernetes.io/, the prefix the NodeRestriction
// admission plugin forbids a node's kubelet to set on its own Node: the
// installer acts on it as root, so the node itself must not be able to
// ask (a key's prefix is a DNS subdomain and its name at most 63
// characters, hence baidu.com-xpu. rather than baidu.com/xpu.).
const PartitionLayoutRequest = "node-restriction.kubernetes.io/baidu.com-xpu.partition-layout"

// partitionLabels are the layout label, when a card of h can be cut, and
// one count per partition size present, by ascending size (the cards and
// their VFs as package partition reads them), named after the device
// plugin's resource (names.PartitionCountLabel: baidu.com/xpu-24gb.count,
// as the plugin's per-size resource baidu.com/xpu-24gb). A layout too
// long for a label value leaves the layout label out, and so does a
// resource name too long for a label key its count; a VF whose size is
// unknown is counted under no size.
func partitionLabels(h *discover.Host, resource string) []Label {
	cards := partition.Cards(h)
	var out []Label
	if slices.ContainsFunc(cards, func(c partition.Card) bool { return c.TotalVFs > 0 || c.NumVFs > 0 }) {
		if v, err := partition.Current(h).LabelValue(); err == nil {
			out = append(out, Label{PartitionLayout, v})
		}
	}
	counts := map[int64]int{}
	for _, c := range cards {
		for _, vf := range c.VFs {
			if vf.MemoryMiB > 0 {
				counts[vf.MemoryMiB]++
			}
		}
	}
	sizes := make([]int64, 0, len(counts))
	for mib := range counts {
		sizes = append(sizes, mib)
	}
	slices.Sort(sizes)
	for _, mib := range sizes {
		key := names.PartitionCountLabel(resource, names.PartitionSizeName(mib))
		if len(validation.IsQualifiedName(key)) == 0 {
			out = append(out, Label{key, strconv.Itoa(counts[mib])})
		}
	}
	return out
}
