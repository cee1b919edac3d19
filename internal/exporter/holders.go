package exporter

import (
	"cmp"
	"slices"

	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
)

// DefaultMaxPodsPerXPU bounds the pods with series of their own per XPU.
const DefaultMaxPodsPerXPU = 16

// holders turns the containers holding one XPU into the holders its series
// are exported for: one per pod, the pod's containers folded into it (a
// label its containers disagree on, the container or the claim, is left
// empty), the first max pods in namespace and pod order. unlisted is the
// number of pods left out. The bound keeps the series of one XPU shared by
// many pods (time-slicing, a shared DRA claim) at max per metric, however
// many pods and containers reference it.
func holders(owners []podresources.Owner, maxPods int) (out []podresources.Owner, unlisted int) {
	type pod struct{ namespace, name string }
	at := map[pod]int{}
	for _, o := range owners {
		k := pod{o.Namespace, o.Pod}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, o)
			continue
		}
		h := &out[i]
		if h.Container != o.Container {
			h.Container = ""
		}
		if h.Claim != o.Claim || h.ClaimNamespace != o.ClaimNamespace {
			h.Claim, h.ClaimNamespace = "", ""
		}
	}
	slices.SortFunc(out, func(a, b podresources.Owner) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod))
	})
	if len(out) > maxPods {
		return out[:maxPods], len(out) - maxPods
	}
	return out, 0
}
