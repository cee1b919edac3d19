package dra

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Dynamic mode needs two alpha or beta API fields that an API server drops
// without a word when their feature gate is off: the slice's counter sets
// and the devices' consumptions (DRAPartitionableDevices, on by default
// since 1.36) and the consumptions' compatibility groups
// (DRADeviceCompatibilityGroups, alpha in 1.37). The helper library only
// notices dropped counters, so the driver asks the API server itself: a
// server-side dry-run create of slices of the shape dynamic mode publishes
// (one P800 card, every partition), then a look at what came back. The
// scheduler has the same gates and ignores devices with groups when its
// gate is off; nothing in the API tells the scheduler's gates, so the
// message names both components.

// Feature gates dynamic mode needs in kube-apiserver and kube-scheduler.
const (
	GatePartitionableDevices      = "DRAPartitionableDevices"
	GateDeviceCompatibilityGroups = "DRADeviceCompatibilityGroups"
)

// ErrGateOff is wrapped by CheckDynamicGates's error when the API server
// drops a field dynamic mode needs.
var ErrGateOff = errors.New("a feature gate dynamic partitions need is off")

// GateError says which feature gates the API server lacks.
type GateError struct {
	// Gates are the gates whose fields the API server dropped.
	Gates []string
}

func (e *GateError) Error() string {
	gates := ""
	for i, g := range e.Gates {
		if i > 0 {
			gates += ","
		}
		gates += g + "=true"
	}
	return fmt.Sprintf("%v: the API server dropped what dynamic partitions publish; start kube-apiserver and kube-scheduler with --feature-gates=%s (static partitions need neither)", ErrGateOff, gates)
}

func (e *GateError) Unwrap() error { return ErrGateOff }

// CheckDynamicGates asks the API server, by a server-side dry run that
// stores nothing, whether it keeps the counter sets, consumptions and
// compatibility groups of dynamic mode's slices for driver on node. It
// returns a *GateError (wrapping ErrGateOff) naming the gates whose fields
// it dropped, another error when the API server refused the slices or
// could not be asked, nil when it keeps everything.
func CheckDynamicGates(ctx context.Context, client kubernetes.Interface, driver, node string) error {
	probes := gateProbes(driver, node)
	var off []string
	for _, p := range probes {
		got, err := client.ResourceV1().ResourceSlices().Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return fmt.Errorf("checking the feature gates of dynamic partitions (a dry-run create of ResourceSlice %s): %w", p.Name, err)
		}
		off = append(off, droppedGates(p, got)...)
	}
	if len(off) > 0 {
		seen := map[string]bool{}
		var gates []string
		for _, g := range off {
			if !seen[g] {
				seen[g] = true
				gates = append(gates, g)
			}
		}
		return &GateError{Gates: gates}
	}
	return nil
}

// droppedGates names the gates of the fields of sent that got lacks.
func droppedGates(sent, got *resourceapi.ResourceSlice) []string {
	var out []string
	if len(sent.Spec.SharedCounters) > 0 && len(got.Spec.SharedCounters) == 0 {
		out = append(out, GatePartitionableDevices)
	}
	for i, d := range sent.Spec.Devices {
		if len(d.ConsumesCounters) == 0 {
			continue
		}
		if i >= len(got.Spec.Devices) || len(got.Spec.Devices[i].ConsumesCounters) == 0 {
			out = append(out, GatePartitionableDevices)
			continue
		}
		for j, c := range d.ConsumesCounters {
			if len(c.CompatibilityGroups) > 0 && (j >= len(got.Spec.Devices[i].ConsumesCounters) || len(got.Spec.Devices[i].ConsumesCounters[j].CompatibilityGroups) == 0) {
				out = append(out, GateDeviceCompatibilityGroups)
			}
		}
	}
	return out
}

// gateProbes are the slices of one P800 card (0000:00:00.0, 96 GiB,
// halves and quarters) as dynamic mode builds them: a slice of its counter
// sets and one of its devices.
func gateProbes(driver, node string) []*resourceapi.ResourceSlice {
	const addr = "0000:00:00.0"
	pci := &discover.PCI{Address: addr, Function: discover.FunctionPF, NUMANode: -1, TotalVFs: 4}
	xpu := &discover.Device{Index: 0, PCI: pci, Model: "P800"}
	facts := discover.Facts{Model: "P800", Board: "P800", Generation: discover.GenerationKunlun3, MemoryMiB: 98304}
	card := dynamicCard{
		card:      partition.Card{Index: 0, Address: addr, Model: "P800", Board: "P800", Generation: discover.GenerationKunlun3, TotalVFs: 4, Allowed: []int{0, 2, 4}, MemoryMiB: 98304},
		pf:        xpunode.Device{ID: "0", Index: 0, NUMANode: -1, Health: xpunode.Healthy, XPU: xpu, Facts: facts},
		memoryMiB: 98304,
	}
	sets := []resourceapi.CounterSet{
		{Name: CardCounterSet(0), Counters: map[string]resourceapi.Counter{CounterMemory: {Value: mib(card.memoryMiB)}}},
		{Name: HandleCounterSet, Counters: map[string]resourceapi.Counter{CounterHandles: {Value: count(discover.HandleLimit(discover.GenerationKunlun3) - 1)}}},
	}
	slice := func(n int) *resourceapi.ResourceSlice {
		nodeName := node
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver + "-gate-check-" + strconv.Itoa(n)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: driver, NodeName: &nodeName,
				Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 2},
			},
		}
	}
	counters, devices := slice(0), slice(1)
	counters.Spec.SharedCounters = sets
	devices.Spec.Devices = card.devices(true)
	return []*resourceapi.ResourceSlice{counters, devices}
}
