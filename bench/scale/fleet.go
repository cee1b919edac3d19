package scale

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/xpu-cdi/xpu-cdi/internal/dra"
)

// writers is how many API calls the fleet has in flight: each simulated
// node is a kubelet or a driver of its own in a real cluster.
const writers = 16

// simNode is one simulated node: its driver (internal/dra, on a fake
// host) and the slices last written for it, by name, with their pool's
// generation.
type simNode struct {
	name   string
	driver *dra.Driver
	slices map[string]*resourceapi.ResourceSlice
	gen    int64
}

// devices counts the devices of the node's slices.
func (n *simNode) devices() int {
	c := 0
	for _, s := range n.slices {
		c += len(s.Spec.Devices)
	}
	return c
}

// fleet is the simulated nodes of one cluster.
type fleet struct {
	client kubernetes.Interface
	nodes  []*simNode
}

// NodeName is the name of simulated node i.
func NodeName(i int) string { return fmt.Sprintf("xpu-node-%04d", i) }

// forEach runs f(0..n-1), at most writers at once, and returns the first
// error.
func forEach(n int, f func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(writers)
	for i := range n {
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}

// nodeStatus is the status of a simulated node: Ready, room for the pods,
// and capacity baidu.com/xpu when xpus > 0.
func nodeStatus(xpus int64) corev1.NodeStatus {
	now := metav1.Now()
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("128"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	if xpus > 0 {
		res[ExtendedResource] = *resource.NewQuantity(xpus, resource.DecimalSI)
	}
	return corev1.NodeStatus{
		Capacity: res, Allocatable: res,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "simulated by xpu-cdi bench/scale", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "v1.37.2"},
	}
}

// createNodes creates the Node objects, Ready, and removes the not-ready
// taint that admission gives a new node (the node lifecycle controller,
// which would remove it, does not run).
func (f *fleet) createNodes(ctx context.Context) error {
	return forEach(len(f.nodes), func(i int) error {
		name := f.nodes[i].name
		_, err := f.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{corev1.LabelHostname: name, "baidu.com/xpu.present": "true"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
		// Controllers (TTL, attach-detach) annotate a new node: read it
		// again on a conflict.
		if err := f.updateNode(ctx, name, true, func(n *corev1.Node) { n.Status = nodeStatus(0) }); err != nil {
			return fmt.Errorf("making node %s Ready: %w", name, err)
		}
		if err := f.updateNode(ctx, name, false, func(n *corev1.Node) { n.Spec.Taints = nil }); err != nil {
			return fmt.Errorf("removing the taints of node %s: %w", name, err)
		}
		return nil
	})
}

// updateNode applies change to the node (its status when status) and
// writes it, again on a conflict.
func (f *fleet) updateNode(ctx context.Context, name string, status bool, change func(*corev1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := f.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		if status {
			_, err = f.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		} else {
			_, err = f.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}
		return err
	})
}

// setCapacity gives every node xpus of baidu.com/xpu in its status (0:
// none), as the kubelet does for a device plugin.
func (f *fleet) setCapacity(ctx context.Context, xpus int64) error {
	return forEach(len(f.nodes), func(i int) error {
		name := f.nodes[i].name
		err := f.updateNode(ctx, name, true, func(n *corev1.Node) {
			conds := n.Status.Conditions
			n.Status = nodeStatus(xpus)
			n.Status.Conditions = conds
		})
		if err != nil {
			return fmt.Errorf("setting %s of node %s to %d: %w", ExtendedResource, name, xpus, err)
		}
		return nil
	})
}

// refresh has every node's driver read its host again (what its poll
// does), without writing anything; it reports how many drivers saw a
// change.
func (f *fleet) refresh() int {
	var changed atomic.Int64
	_ = forEach(len(f.nodes), func(i int) error {
		if f.nodes[i].driver.Refresh() {
			changed.Add(1)
		}
		return nil
	})
	return int(changed.Load())
}

// publish writes every node's slices as its driver builds them (Slices,
// the objects the ResourceSlice controller writes): created the first
// time, updated after, and those the driver no longer publishes deleted.
// When the set of slices changes (static to dynamic mode: one slice to
// three), the pool's generation goes up, as the controller does, so that
// the scheduler never takes old and new slices for one pool. It returns
// the API writes, retries after a conflict included.
func (f *fleet) publish(ctx context.Context) (int, error) {
	var writes atomic.Int64
	err := forEach(len(f.nodes), func(i int) error {
		n := f.nodes[i]
		want := n.driver.Slices()
		if n.slices == nil {
			n.slices = map[string]*resourceapi.ResourceSlice{}
		}
		same := len(want) == len(n.slices)
		for _, w := range want {
			_, ok := n.slices[w.Name]
			same = same && ok
		}
		if !same && len(n.slices) > 0 {
			n.gen++
		}
		for _, w := range want {
			w.Spec.Pool.Generation = n.gen
			old, ok := n.slices[w.Name]
			if !ok {
				writes.Add(1)
				s, err := f.client.ResourceV1().ResourceSlices().Create(ctx, w, metav1.CreateOptions{})
				if err != nil {
					return fmt.Errorf("creating ResourceSlice %s of node %s: %w", w.Name, n.name, err)
				}
				n.slices[w.Name] = s
				continue
			}
			for {
				next := old.DeepCopy()
				next.Spec = w.Spec
				writes.Add(1)
				s, err := f.client.ResourceV1().ResourceSlices().Update(ctx, next, metav1.UpdateOptions{})
				if apierrors.IsConflict(err) {
					if old, err = f.client.ResourceV1().ResourceSlices().Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
						continue
					}
				}
				if err != nil {
					return fmt.Errorf("updating ResourceSlice %s of node %s: %w", w.Name, n.name, err)
				}
				n.slices[w.Name] = s
				break
			}
		}
		for name := range n.slices {
			if slices.ContainsFunc(want, func(w *resourceapi.ResourceSlice) bool { return w.Name == name }) {
				continue
			}
			writes.Add(1)
			err := f.client.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting ResourceSlice %s of node %s: %w", name, n.name, err)
			}
			delete(n.slices, name)
		}
		return nil
	})
	return int(writes.Load()), err
}
