package e2e

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// podEdit shapes a testPod further.
type podEdit func(*corev1.Pod)

// testPod is the pod the e2e tests run: in namespace default, on the host
// network (a pod of the test node gets no address of its own), deleted
// without a grace period, with one container "main" of image (loaded
// into the engine, never pulled) that sleeps; edits shape it further.
func testPod(name, image string, edits ...podEdit) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sleep", "2147483647"},
			}},
		},
	}
	for _, edit := range edits {
		edit(pod)
	}
	return pod
}

// withCommand runs command in the container instead of the sleep.
func withCommand(command ...string) podEdit {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Command = command }
}

// withLimit asks for n of the extended resource (baidu.com/xpu, a
// partition's resource) through the container's limits, as a device
// plugin's pod does.
func withLimit(resourceName string, n int64) podEdit {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		c.Resources.Limits[corev1.ResourceName(resourceName)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
}

// withClaim gives the pod a claim "xpu", used by its container, from a
// ResourceClaimTemplate (claimFrom "template:NAME") or of a
// ResourceClaim ("claim:NAME").
func withClaim(claimFrom string) podEdit {
	return func(p *corev1.Pod) {
		kind, ref, _ := strings.Cut(claimFrom, ":")
		claim := corev1.PodResourceClaim{Name: "xpu", ResourceClaimTemplateName: &ref}
		if kind == "claim" {
			claim = corev1.PodResourceClaim{Name: "xpu", ResourceClaimName: &ref}
		}
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, claim)
		c := &p.Spec.Containers[0]
		c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: "xpu"})
	}
}

// asStaticPod makes the pod a static pod's manifest as the standalone
// kubelet tests write it: never restarted (a refused pod stays refused),
// with the default grace period.
func asStaticPod(p *corev1.Pod) {
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.TerminationGracePeriodSeconds = nil
}

// sleeperPod is a testPod that prints a line and sleeps.
func sleeperPod(name, image string) *corev1.Pod {
	return testPod(name, image, withCommand("sh", "-c", "echo hello from "+name+"; exec sleep 2147483647"))
}

// xpuPod is a testPod with the claim "xpu" (withClaim).
func xpuPod(name, image, claimFrom string) *corev1.Pod {
	return testPod(name, image, withClaim(claimFrom))
}

// limitsPod is a testPod asking for one of resourceName (withLimit).
func limitsPod(name, image, resourceName string) *corev1.Pod {
	return testPod(name, image, withLimit(resourceName, 1))
}

// claimTemplate is a ResourceClaimTemplate in namespace default of count
// devices of the class xpu.baidu.com, with optional CEL selectors and a
// NUMA constraint.
func claimTemplate(name string, count int, numa bool, selectors ...string) *resourceapi.ResourceClaimTemplate {
	req := resourceapi.DeviceRequest{
		Name: "xpu",
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "xpu.baidu.com",
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           int64(count),
		},
	}
	for _, sel := range selectors {
		req.Exactly.Selectors = append(req.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: sel}})
	}
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}},
		},
	}
	if numa {
		tmpl.Spec.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{
			Requests:       []string{"xpu"},
			MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("resource.kubernetes.io/numaNode")),
		}}
	}
	return tmpl
}

// classClaimTemplate is a claimTemplate of one device of another class.
func classClaimTemplate(name, class string) *resourceapi.ResourceClaimTemplate {
	tmpl := claimTemplate(name, 1, false)
	tmpl.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName = class
	return tmpl
}
