package dra

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// This file builds what the driver publishes in dynamic partition mode:
// every way an SR-IOV card may be cut, for the scheduler to choose, instead
// of the layout the card has now.
//
// Each SR-IOV card has a counter set (CardCounterSet) holding its memory.
// Its devices are the whole card, which consumes all of it, and every VF
// slot of every count the board allows (P800: 2 halves and 4 quarters),
// each consuming its size with a compatibility group naming its count
// (CompatibilityGroup): the scheduler then never puts a half and a quarter
// on one card, which P800 cannot hold, while memory alone would allow it.
// A node-wide counter set (HandleCounterSet) holds the driver's handle
// budget less the PFs' handles; each slot consumes one, the whole card
// none (its PF handle is already taken out of the budget).
//
// Device names come from the card and the slot, not from the /dev/xpuN of
// a VF, so that they do not change when a card is laid out again. The card
// is its place in PCI address order among the node's cards (0 is the
// lowest address), which neither a re-layout nor the driver's numbering of
// its nodes at the next boot changes: xpu-3 (whole), xpu-3-h0..h1
// (halves), xpu-3-q0..q3 (quarters); a count with no short name is
// xpu-3-v3-0. The slot number is the VF's position (virtfn N of the PF)
// once the card has that count. The whole card's index attribute is its
// PF's /dev/xpuN, as in static mode.
//
// A card without SR-IOV, without a PF node, or whose memory no source
// tells is offered as in static mode.

// PartitionMode is how the driver offers SR-IOV partitions.
type PartitionMode int

const (
	// PartitionsStatic offers the devices the host has now (the layout
	// `partition apply` made).
	PartitionsStatic PartitionMode = iota
	// PartitionsDynamic offers every possible partition of every SR-IOV
	// card, with shared counters and compatibility groups.
	PartitionsDynamic
)

// ErrPartitionMode is wrapped by ParsePartitionMode's error.
var ErrPartitionMode = errors.New("unknown partition mode")

// PartitionModes are the names of the modes, as --partitions takes them.
var PartitionModes = []string{"static", "dynamic"}

// String is the mode's name, as --partitions takes it.
func (m PartitionMode) String() string {
	if int(m) >= 0 && int(m) < len(PartitionModes) {
		return PartitionModes[m]
	}
	return "PartitionMode(" + strconv.Itoa(int(m)) + ")"
}

// ParsePartitionMode reads a mode's name (static, dynamic).
func ParsePartitionMode(s string) (PartitionMode, error) {
	i := slices.Index(PartitionModes, s)
	if i < 0 {
		return 0, fmt.Errorf("%w %q: give %s", ErrPartitionMode, s, strings.Join(PartitionModes, " or "))
	}
	return PartitionMode(i), nil
}

// Names of the counters and counter sets of dynamic mode.
const (
	// CounterMemory is the card counter set's counter: the card's memory
	// in bytes.
	CounterMemory = "memory"
	// CounterHandles is the handle counter set's counter.
	CounterHandles = "handles"
	// HandleCounterSet is the node-wide counter set of the driver's
	// handle budget.
	HandleCounterSet = "handles"
)

// CardCounterSet is the counter set of card n (its place in PCI address
// order).
func CardCounterSet(card int) string { return "card-" + strconv.Itoa(card) }

// CompatibilityGroup is the group of the slots of a card cut into n VFs:
// only slots of one count share a card.
func CompatibilityGroup(n int) string { return "vfs-" + strconv.Itoa(n) }

// CardName is the device name of the whole card n (its place in PCI
// address order): names.DRACardDevice.
func CardName(card int) string { return names.DRACardDevice(card) }

// SlotName is the device name of VF slot (0-based) of card n (its place
// in PCI address order) when the card is cut into count VFs:
// names.DRASlotDevice.
func SlotName(card, count, slot int) string { return names.DRASlotDevice(card, count, slot) }

// vfModelSuffix is what discovery appends to a PF's model for its VFs
// ("P800 VF").
const vfModelSuffix = " VF"

// dynamicCard is one card offered in dynamic mode.
type dynamicCard struct {
	// ordinal is the card's place in PCI address order.
	ordinal   int
	card      partition.Card
	pf        xpunode.Device
	memoryMiB int64
}

// deviceHealth is the health the kubelet is told of one published device.
type deviceHealth struct {
	name   string
	reason string // empty when healthy
}

// healthOf is the health of the device name whose state is dev's.
func healthOf(name string, dev xpunode.Device) deviceHealth {
	h := deviceHealth{name: name}
	if dev.Health != xpunode.Healthy {
		h.reason = dev.Reason
		if h.reason == "" {
			h.reason = "unhealthy"
		}
	}
	return h
}

// dynamicCards returns the cards of h that dynamic mode offers.
func dynamicCards(h *discover.Host) []dynamicCard {
	var out []dynamicCard
	cards := partition.DynamicCards(h)
	ordinals := slices.Sorted(maps.Keys(cards))
	for _, ordinal := range ordinals {
		c := cards[ordinal]
		d := h.Device(c.Index)
		if d == nil {
			continue
		}
		mem := c.MemoryMiB
		if mem <= 0 {
			// The PF's facts do not tell: the table's largest total.
			for _, n := range c.Allowed[1:] {
				mem = max(mem, int64(n)*partition.SizeMiB(c.Board, n))
			}
		}
		if mem <= 0 {
			continue
		}
		pf := xpunode.Device{ID: strconv.Itoa(d.Index), Index: d.Index, NUMANode: -1, State: d.State, Health: xpunode.HealthOf(d.State), XPU: d, Facts: h.FactsOf(d)}
		if d.PCI != nil {
			pf.NUMANode = d.PCI.NUMANode
		}
		if pf.Health == xpunode.Unhealthy {
			pf.Reason = "the driver reports state " + d.State
		}
		out = append(out, dynamicCard{ordinal: ordinal, card: c, pf: pf, memoryMiB: mem})
	}
	return out
}

// cardOf returns the PCI address of the card dev belongs to: its parent
// for a VF, its own for a PF; "" without PCI facts.
func cardOf(dev xpunode.Device) string {
	p := dev.XPU.PCI
	switch {
	case p == nil:
		return ""
	case p.Function == discover.FunctionVF:
		return p.Parent
	}
	return p.Address
}

// buildDynamic converts a scan into dynamic mode's devices and counter
// sets, and the health of each device. devs are the scan's offered devices
// (with the spec and control checks); a card is unhealthy when its PF or
// one of its VFs is, and then every device of it is tainted. A taint that
// was already there keeps its time.
func (d *Driver) buildDynamic(devs []xpunode.Device, h *discover.Host, prev []resourceapi.Device) ([]resourceapi.Device, []resourceapi.CounterSet, []deviceHealth, []string) {
	if h == nil {
		return []resourceapi.Device{}, nil, nil, nil
	}
	cards := dynamicCards(h)
	byAddr := make(map[string]*dynamicCard, len(cards))
	for i := range cards {
		byAddr[cards[i].card.Address] = &cards[i]
	}
	// The card's health: the first unhealthy of its offered devices, else
	// its PF's own state (a cut card's PF is not offered), else the
	// control node's.
	sick := map[string]xpunode.Device{}
	var static []xpunode.Device
	for _, dev := range devs {
		addr := cardOf(dev)
		if byAddr[addr] == nil {
			static = append(static, dev)
			continue
		}
		if _, seen := sick[addr]; !seen && dev.Health != xpunode.Healthy {
			sick[addr] = dev
		}
	}
	var api []resourceapi.Device
	var health []deviceHealth
	var warnings []string
	taken := map[string]bool{}
	for _, c := range cards {
		for _, dev := range c.devices(false) {
			taken[dev.Name] = true
		}
	}
	// Static devices, in index order, as static mode has them, unless a
	// card's name is theirs (a node that mixes SR-IOV cards with cards or
	// VFs dynamic mode cannot cut); Refresh then orders all of them best
	// fit first (order.go).
	for i, dev := range d.build(static, h, prev) {
		if taken[dev.Name] {
			warnings = append(warnings, fmt.Sprintf("device %s (/dev/xpu%d, a card dynamic mode cannot cut) left out: a partitionable card's device has its name", dev.Name, static[i].Index))
			continue
		}
		api = append(api, dev)
		health = append(health, healthOf(dev.Name, static[i]))
	}
	all := partition.Cards(h)
	_, limit := partition.Handles(all)
	budget := max(0, limit-len(all))
	var counters []resourceapi.CounterSet
	for _, c := range cards {
		state, ok := sick[c.card.Address]
		if !ok {
			state = c.pf
			if h.Control == nil {
				state.Health = xpunode.Unhealthy
				state.Reason = h.DevRoot + "/dev/xpuctrl is missing: no XPU is usable without it"
			}
		}
		counters = append(counters, resourceapi.CounterSet{
			Name:     CardCounterSet(c.ordinal),
			Counters: map[string]resourceapi.Counter{CounterMemory: {Value: mib(c.memoryMiB)}},
		})
		for _, dev := range c.devices(limit > 0) {
			if taint, ok := d.taintOf(state, h); ok {
				dev.Taints = []resourceapi.DeviceTaint{keepTime(taint, prev, dev.Name, d.o.Clock)}
			}
			api = append(api, dev)
			health = append(health, healthOf(dev.Name, state))
		}
	}
	if limit > 0 && len(cards) > 0 {
		counters = append(counters, resourceapi.CounterSet{
			Name:     HandleCounterSet,
			Counters: map[string]resourceapi.Counter{CounterHandles: {Value: count(budget)}},
		})
	}
	if api == nil {
		api = []resourceapi.Device{}
	}
	return api, counters, health, warnings
}

// devices are the card's devices: the whole card, then the slots of each
// count (Refresh publishes them smallest first, order.go). handles says
// whether the slots consume from the handle set.
func (c dynamicCard) devices(handles bool) []resourceapi.Device {
	whole := apiDevice(c.pf)
	whole.Name = CardName(c.ordinal)
	whole.Attributes[AttrSRIOVRole] = str(string(discover.FunctionPF))
	whole.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapacityMemory: {Value: mib(c.memoryMiB)}}
	whole.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
		CounterSet: CardCounterSet(c.ordinal),
		Counters:   map[string]resourceapi.Counter{CounterMemory: {Value: mib(c.memoryMiB)}},
	}}
	out := []resourceapi.Device{whole}
	for _, n := range c.card.Allowed[1:] {
		size := partition.SizeMiB(c.card.Board, n)
		if size <= 0 || int64(n)*size > c.memoryMiB {
			continue
		}
		for slot := range n {
			dev := whole.DeepCopy()
			dev.Name = SlotName(c.ordinal, n, slot)
			// A slot has no node and no PCI address of its own until the
			// card is cut: no index, no pciBusID.
			delete(dev.Attributes, AttrIndex)
			delete(dev.Attributes, deviceattribute.StandardDeviceAttributePCIBusID)
			if c.pf.Facts.Model != "" {
				dev.Attributes[AttrModel] = str(attributeString(c.pf.Facts.Model + vfModelSuffix))
			}
			dev.Attributes[AttrSRIOVRole] = str(string(discover.FunctionVF))
			dev.Attributes[AttrParentBusID] = str(c.card.Address)
			dev.Attributes[AttrPartition] = str(names.PartitionFraction(n))
			dev.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapacityMemory: {Value: mib(size)}}
			dev.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
				CounterSet:          CardCounterSet(c.ordinal),
				Counters:            map[string]resourceapi.Counter{CounterMemory: {Value: mib(size)}},
				CompatibilityGroups: []string{CompatibilityGroup(n)},
			}}
			if handles {
				dev.ConsumesCounters = append(dev.ConsumesCounters, resourceapi.DeviceCounterConsumption{
					CounterSet: HandleCounterSet,
					Counters:   map[string]resourceapi.Counter{CounterHandles: {Value: count(1)}},
				})
			}
			out = append(out, *dev)
		}
	}
	return out
}

func mib(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }

func count(n int) resource.Quantity { return *resource.NewQuantity(int64(n), resource.DecimalSI) }

// splitCounterSets cuts the counter sets into slices of at most the API's
// number of sets per slice.
func splitCounterSets(sets []resourceapi.CounterSet) [][]resourceapi.CounterSet {
	var out [][]resourceapi.CounterSet
	for i := 0; i < len(sets); i += resourceapi.ResourceSliceMaxCounterSets {
		out = append(out, sets[i:min(i+resourceapi.ResourceSliceMaxCounterSets, len(sets))])
	}
	return out
}

// describeDynamic summarizes dynamic mode's offer for the log.
func describeDynamic(api []resourceapi.Device, counters []resourceapi.CounterSet) string {
	return fmt.Sprintf("%d device(s) on %d counter set(s)", len(api), len(counters))
}
