package dra

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"

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
// stores nothing, whether it takes and keeps the slices dynamic mode would
// publish for this node (read from the host now, whatever the driver's
// mode), named after the node and the driver with -gate-check; on a node
// without an SR-IOV card, the slices of one P800 card. It returns a
// *GateError (wrapping ErrGateOff) naming the gates whose fields the API
// server dropped, another error when it refused a slice or could not be
// asked, nil when it keeps everything.
func (d *Driver) CheckDynamicGates(ctx context.Context, client kubernetes.Interface) error {
	sc := d.scanner.Scan()
	api, counters, _, _ := d.buildDynamic(sc.Devices, sc.Host, nil)
	api, _ = d.validate(api)
	probes := d.slicesOf(poolOf(api, counters), "-gate-check")
	if len(counters) == 0 {
		probes = d.slicesOf(gateProbe(), "-gate-check")
	}
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

// gateProbe is the pool of one P800 card (0000:00:00.0, 96 GiB, halves
// and quarters) as dynamic mode builds it: a slice of its counter sets and
// one of its devices.
func gateProbe() resourceslice.Pool {
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
	return poolOf(card.devices(true), sets)
}
