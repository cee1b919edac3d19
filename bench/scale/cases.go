package scale

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
)

// What the simulated nodes offer.
const (
	// ExtendedResource is the device plugin's resource name, and the
	// extendedResourceName of the xpu.baidu.com DeviceClass.
	ExtendedResource = corev1.ResourceName("baidu.com/xpu")
	// DevicesPerNode is the XPU count of the fake P800 host of every node.
	DevicesPerNode = 8
	// PartitionsPerNode is how many 48 GiB partitions (case f) a node
	// holds: 8 cards in 2 VFs each.
	PartitionsPerNode = 16
	// DynamicDevicesPerNode is what the driver's dynamic mode publishes
	// for 8 SR-IOV P800: per card the whole card, 2 halves and 4
	// quarters.
	DynamicDevicesPerNode = 8 * (1 + 2 + 4)
	// The classes of deployments/xpu-dra-deviceclasses.yaml the cases use.
	classAll     = names.DRADriver
	classKunlun3 = "kunlun3.xpu.baidu.com"
)

// Case is one way of asking for XPUs, measured with the same nodes.
type Case struct {
	Letter string
	Title  string
	// DRA cases need the DeviceClasses; (a) runs before they exist, as
	// in a cluster of the device plugin.
	DRA bool
	// NodeCapacity: the nodes' status carries baidu.com/xpu (the device
	// plugin's path); the other cases run on nodes without it.
	NodeCapacity bool
	// Partitioned: the slices are dynamic mode's (every partition of
	// every SR-IOV card, with counters and compatibility groups).
	Partitioned bool
	// DevicesPerPod is how many devices one pod takes.
	DevicesPerPod int
	// Request is the device request of the ResourceClaimTemplate (nil:
	// the pod asks for the extended resource).
	Request     *resourceapi.DeviceRequest
	Constraints []resourceapi.DeviceConstraint
}

func (c Case) devicesPerNode() int {
	if c.Partitioned {
		return PartitionsPerNode
	}
	return DevicesPerNode
}

// fits is how many pods of the case n nodes hold.
func (c Case) fits(n int) int { return n * (c.devicesPerNode() / c.DevicesPerPod) }

func exactly(class string, count int64, selectors ...string) *resourceapi.DeviceRequest {
	r := &resourceapi.DeviceRequest{Name: "xpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
	}}
	for _, s := range selectors {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return r
}

var numaNode = resourceapi.FullyQualifiedName("resource.kubernetes.io/numaNode")

// cases are the scale cases of docs/benchmarks.md, in letter order.
func cases() []Case {
	return []Case{
		{Letter: "a", Title: "extended resource baidu.com/xpu: 1, node capacity (device plugin path)", NodeCapacity: true, DevicesPerPod: 1},
		{Letter: "b", Title: "claim template, class xpu.baidu.com, 1 XPU", DRA: true, DevicesPerPod: 1, Request: exactly(classAll, 1)},
		{
			Letter: "c", Title: "claim template, 2 XPUs on one NUMA node (matchAttribute)", DRA: true, DevicesPerPod: 2,
			Request:     exactly(classAll, 2),
			Constraints: []resourceapi.DeviceConstraint{{Requests: []string{"xpu"}, MatchAttribute: &numaNode}},
		},
		{
			Letter: "d", Title: "claim template, class kunlun3.xpu.baidu.com + CEL on the model", DRA: true, DevicesPerPod: 1,
			Request: exactly(classKunlun3, 1, `device.attributes["xpu.baidu.com"].model == "P800"`),
		},
		{Letter: "e", Title: "DRA-backed extended resource baidu.com/xpu: 1 (extendedResourceName)", DRA: true, DevicesPerPod: 1},
		{
			Letter: "f", Title: "claim template, one 48 GiB partition by a memory selector, dynamic slices (56 devices + counters per node)", DRA: true, Partitioned: true, DevicesPerPod: 1,
			Request: exactly(classAll, 1, `device.capacity["xpu.baidu.com"].memory.compareTo(quantity("48Gi")) == 0`),
		},
	}
}

// Letters lists the case letters.
func Letters() []string {
	var out []string
	for _, c := range cases() {
		out = append(out, c.Letter)
	}
	return out
}

func caseByLetter(l string) (Case, bool) {
	all := cases()
	i := slices.IndexFunc(all, func(c Case) bool { return c.Letter == l })
	if i < 0 {
		return Case{}, false
	}
	return all[i], true
}

// template is the case's ResourceClaimTemplate in ns (nil for the
// extended resource cases).
func (c Case) template(ns string) *resourceapi.ResourceClaimTemplate {
	if c.Request == nil {
		return nil
	}
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "xpu", Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests:    []resourceapi.DeviceRequest{*c.Request},
			Constraints: c.Constraints,
		}}},
	}
}

// pod is one pod of the case. It never runs (no kubelet); its image is
// never pulled.
func (c Case) pod(ns, name string) *corev1.Pod {
	ctr := corev1.Container{Name: "work", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: corev1.PullNever}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "xpu-scale"}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{ctr},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if c.Request == nil {
		q := *resource.NewQuantity(int64(c.DevicesPerPod), resource.DecimalSI)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{ExtendedResource: q}
		return p
	}
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "xpu", ResourceClaimTemplateName: new(string)}}
	*p.Spec.ResourceClaims[0].ResourceClaimTemplateName = "xpu"
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "xpu"}}
	return p
}
