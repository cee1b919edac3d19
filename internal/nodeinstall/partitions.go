package nodeinstall

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/labels"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Partitions is the partition layout the installer keeps on its node
// (docs/partitions.md, "Keeping a layout").
type Partitions struct {
	// Layout is the layout of every node (the chart's partitions.layout);
	// nil: only the node label's.
	Layout partition.Layout
	// NodeLabels returns the labels of the installer's Node. When set, the
	// value of labels.PartitionLayoutRequest there is the node's layout,
	// over Layout; without it, the value of the old request label
	// labels.PartitionLayout (a node's kubelet may set that one), with a
	// warning. Nil: no label is read.
	NodeLabels func(ctx context.Context) (map[string]string, error)
	// LabelInterval is how often NodeLabels is asked at most (default
	// DefaultLabelInterval): between two reads the last value stands, so
	// that a thousand nodes do not each GET their Node every pass.
	LabelInterval time.Duration
	// Apply lays the host's cards out as l (sriov.Apply: checked
	// whole, cards in use refused, nothing changed on a refusal).
	Apply func(ctx context.Context, l partition.Layout) error
}

// DefaultLabelInterval is how often the node label is read by default.
const DefaultLabelInterval = 30 * time.Second

// partitionState is what the last successful apply left: the layout asked
// for and the cards' VF counts after it. Apply runs again only when either
// changes (a new layout, or someone re-laid-out a card since).
type partitionState struct {
	layout string
	cards  string
}

// wantedLayout is the layout the node should have and where it comes from;
// nil when none is asked for. A label that is not a layout is an error:
// the cards are left as they are rather than laid out as the chart says,
// since the label says the admin wants something else for this node.
func (in *Installer) wantedLayout(ctx context.Context) (partition.Layout, string, error) {
	p := in.o.Partitions
	if p.NodeLabels != nil {
		ls, err := in.nodeLabels(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("reading the node's labels (%s): %w", labels.PartitionLayoutRequest, err)
		}
		key, v := labels.PartitionLayoutRequest, ls[labels.PartitionLayoutRequest]
		if v == "" && ls[labels.PartitionLayout] != "" {
			key, v = labels.PartitionLayout, ls[labels.PartitionLayout]
			if in.oldLabelWarned != v {
				in.o.Log.Warnf("the node label %s=%s asks for a layout under its old name, which the node's own kubelet may set: "+
					"label the node %s=%s instead (the old name is read for one more release)", key, v, labels.PartitionLayoutRequest, v)
				in.oldLabelWarned = v
			}
		}
		if v != "" {
			l, err := partition.ParseLabelValue(v)
			if err != nil {
				return nil, "", fmt.Errorf("node label %s=%s: %w; the cards are left as they are", key, v, err)
			}
			return l, "node label " + key + "=" + v, nil
		}
	}
	if len(p.Layout) > 0 {
		return p.Layout, "the installer's layout", nil
	}
	return nil, "", nil
}

// nodeLabels are the node's labels, read again when the last read is
// older than LabelInterval (or failed).
func (in *Installer) nodeLabels(ctx context.Context) (map[string]string, error) {
	now := time.Now()
	if !in.labelAt.IsZero() && now.Sub(in.labelAt) < in.o.Partitions.LabelInterval {
		return in.labels, nil
	}
	ls, err := in.o.Partitions.NodeLabels(ctx)
	if err != nil {
		in.labelAt = time.Time{}
		return nil, err
	}
	in.labels, in.labelAt = ls, now
	return ls, nil
}

// syncPartitions lays the cards out as wanted before the spec is written:
// when the layout asked for changed since the last successful apply, or
// the cards no longer have the VF counts that apply left. It reports
// whether it applied: the host changed, and the caller reads it again and
// records its cards (appliedOn).
func (in *Installer) syncPartitions(ctx context.Context, h *discover.Host) (bool, error) {
	if in.o.Partitions == nil {
		return false, nil
	}
	want, from, err := in.wantedLayout(ctx)
	if err != nil || want == nil {
		return false, err
	}
	if in.partitions != nil && in.partitions.layout == want.String() && in.partitions.cards == cardState(h) {
		return false, nil
	}
	in.partitions = nil
	if err := in.o.Partitions.Apply(ctx, want); err != nil {
		return false, fmt.Errorf("laying the cards out as %s (%s): %w", want, from, err)
	}
	in.partitions = &partitionState{layout: want.String()}
	in.o.Log.Infof("the cards are laid out as %s (%s)", want, from)
	return true, nil
}

// appliedOn records the cards of h, the host as read after an apply.
func (in *Installer) appliedOn(h *discover.Host) {
	if in.partitions != nil {
		in.partitions.cards = cardState(h)
	}
}

// cardState is the VF count of every SR-IOV physical function of h, by
// PCI address: what a layout changes.
func cardState(h *discover.Host) string {
	if h == nil {
		return ""
	}
	var parts []string
	for _, d := range h.Devices {
		if p := d.PCI; p != nil && p.Function == discover.FunctionPF && (p.TotalVFs > 0 || p.NumVFs > 0) {
			parts = append(parts, p.Address+"="+strconv.Itoa(p.NumVFs))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// withoutLayoutLabel leaves the layout label out of ls: where the installer
// keeps a layout, the node label baidu.com/xpu.partition-layout is still
// read as the admin's request (under its old name), and a value NFD
// published would read as one, or be put back over the admin's (NFD owns
// the labels it publishes).
func withoutLayoutLabel(ls []labels.Label) []labels.Label {
	return slices.DeleteFunc(ls, func(l labels.Label) bool { return l.Key == labels.PartitionLayout })
}

// errNoApply is the error of a Partitions without Apply.
var errNoApply = errors.New("partitions: no Apply")
