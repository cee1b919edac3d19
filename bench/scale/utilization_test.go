package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/xpu-cdi/xpu-cdi/internal/benchstat"
	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// compatibilityGate is the alpha gate dynamic mode needs in kube-apiserver
// (which drops compatibilityGroups without it) and kube-scheduler (which
// ignores devices that carry them without it).
const compatibilityGate = "DRADeviceCompatibilityGroups=true"

// policiesPerLoad is how many policies run at each load.
const policiesPerLoad = 6

// policy is one way of giving the nodes their devices: a static layout of
// every node, or dynamic mode (layout nil).
type policy struct {
	name   string
	layout NodeLayout
}

func (p policy) layoutName() string {
	if p.layout == nil {
		return "dynamic"
	}
	return p.layout.String()
}

// TestUtilization is make bench-utilization, and with no XPU_UTIL_*
// variable the small run of CI (2 nodes, 20 jobs, one load below
// saturation): every policy must run and place jobs, and the report must be
// written; no figure is asserted.
func TestUtilization(t *testing.T) {
	cfg, err := UtilConfigFromEnv(os.Getenv)
	require.NoError(t, err)
	testreq.Root(t, "the control plane runs as root and the fake hosts make device nodes")
	out := cfg.Out
	if out == "" {
		out = t.TempDir()
	}
	rep := &UtilReport{Started: time.Now(), KubernetesVersion: harness.KubernetesVersion, CPUs: runtime.NumCPU(), Config: cfg}
	rep.Notes = append(rep.Notes, fmt.Sprintf("load average at the start: %.1f", load1()))

	base := sriovP800x8()
	requirePlanRefuses(t, base, Uniform(4))
	hosts := map[string]*fakeHost{}
	hostOf := func(l NodeLayout) *fakeHost {
		key := fmt.Sprint([]int(l))
		if h, ok := hosts[key]; ok {
			return h
		}
		requirePlanAccepts(t, base, l)
		h, err := base.WithCardVFs(l)
		require.NoError(t, err)
		hosts[key] = newFakeHost(t, h)
		return hosts[key]
	}

	qps := fmt.Sprint(clientQPS)
	c := harness.NewCluster(t, harness.WithControlPlaneOnly(), harness.WithFeatureGates(compatibilityGate),
		harness.WithComponentFlags("kube-scheduler", "--kube-api-qps="+qps, "--kube-api-burst="+qps),
		harness.WithComponentFlags("kube-controller-manager", "--kube-api-qps="+qps, "--kube-api-burst="+qps))
	rc := rest.CopyConfig(c.Config)
	rc.QPS, rc.Burst = clientQPS, clientQPS
	client, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	f := &fleet{client: client}
	for i := range cfg.Nodes {
		f.nodes = append(f.nodes, &simNode{name: NodeName(i)})
	}
	require.NoError(t, f.createNodes(t.Context()))
	createDeviceClasses(t, client)

	gen := int64(0)
	for li, load := range cfg.Loads {
		jobs, err := NewTrace(cfg.Trace(load, false))
		require.NoError(t, err)
		span := SpanOf(jobs, cfg.MeanDuration)
		lastJobs, err := NewTrace(cfg.Trace(load, true))
		require.NoError(t, err)
		best := BestMix(jobs, cfg.Nodes, span)
		lastWeek := BestMix(lastJobs, cfg.Nodes, SpanOf(lastJobs, cfg.MeanDuration))
		t.Logf("load %.2f: %d jobs, horizon %s; hindsight-best static mix %s (model %.1f%%), last week's %s (on last week's trace %.1f%%)",
			load, len(jobs), span.Horizon.Round(time.Millisecond), best.Layout, 100*best.Utilisation, lastWeek.Layout, 100*lastWeek.Utilisation)
		policies := []policy{
			{name: "static all=0", layout: Uniform(0)},
			{name: "static all=2", layout: Uniform(2)},
			{name: "static all=4 (6 cards: handle budget)", layout: MaxQuarters()},
			{name: "static, best for this trace (hindsight)", layout: best.Layout},
			{name: "static, best for last week's trace", layout: lastWeek.Layout},
			{name: "dynamic", layout: nil},
		}
		require.Len(t, policies, policiesPerLoad)
		for pi, p := range policies {
			gen++
			publishPolicy(t, f, p, hostOf, gen)
			time.Sleep(settle)
			ns := fmt.Sprintf("util-%d-%d", li, pi)
			r := runTrace(t, c, f, ns, jobs, span)
			r.Load, r.Policy, r.Layout, r.Nodes = load, p.name, p.layoutName(), cfg.Nodes
			if p.layout != nil {
				r.ModelUtilisation = Simulate(jobs, cfg.Nodes, p.layout, span).Utilisation
			}
			t.Logf("load %.2f, %s (%s): utilisation %.1f%%, %d/%d placed, p50 wait %.2f s, p99 %.2f s, scheduler %.1f ms CPU/pod",
				load, r.Policy, r.Layout, 100*r.Utilisation, r.Placed, r.Jobs, r.P50WaitMs/1000, r.P99WaitMs/1000, r.SchedulerCPUPerPod)
			rep.Results = append(rep.Results, r)
			require.NoError(t, rep.Write(out))
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("load average at the end: %.1f", load1()))
	require.NoError(t, rep.Write(out))
	t.Logf("report: %s", filepath.Join(out, "utilization-results.md"))

	data, err := os.ReadFile(filepath.Join(out, "utilization-results.json"))
	require.NoError(t, err)
	var back []UtilResult
	require.NoError(t, json.Unmarshal(data, &back))
	require.Len(t, back, policiesPerLoad*len(cfg.Loads), "every policy at every load")
	for _, r := range back {
		require.Positive(t, r.Placed, "load %.2f, %s: no job placed", r.Load, r.Policy)
	}
}

// sriovP800x8 is the P800x8 box (driver 4.x procfs, which reports each
// card's memory: the jobs' selector reads it) with SR-IOV on every card
// (sriov_totalvfs 4) and every card whole.
func sriovP800x8() fakehost.Host {
	h := fakehost.P800x8()
	h.Shape = "p800x8-sriov-procfs"
	for i := range h.Devices {
		h.Devices[i].TotalVFs = 4
	}
	return h
}

// planOf is the layout l of the cards of h as partition apply takes it:
// one entry per card index.
func planOf(t *testing.T, h fakehost.Host, l NodeLayout) error {
	t.Helper()
	tree := fakehosttest.Build(t, h)
	host, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	cards := partition.Cards(host)
	require.Len(t, cards, len(l))
	var layout partition.Layout
	for i, c := range cards {
		layout = append(layout, partition.Entry{Selector: strconv.Itoa(c.Index), VFs: l[i]})
	}
	_, err = partition.Plan(cards, layout)
	return err
}

// requirePlanAccepts fails unless partition apply would lay the cards out
// as l: a static layout the bench measures is one a node can have.
func requirePlanAccepts(t *testing.T, h fakehost.Host, l NodeLayout) {
	t.Helper()
	require.NoError(t, planOf(t, h, l), "layout %s", l)
}

// requirePlanRefuses fails unless partition apply refuses l (all=4 on 8
// P800: 40 handles of the driver's 32).
func requirePlanRefuses(t *testing.T, h fakehost.Host, l NodeLayout) {
	t.Helper()
	err := planOf(t, h, l)
	require.Error(t, err, "layout %s", l)
	require.Contains(t, err.Error(), "device handles", "layout %s", l)
}

// publishPolicy replaces every node's slices with those its driver
// publishes under p: a static layout's host in static mode, or the whole
// cards' host in dynamic mode. The old slices are gone before the new ones
// come (a pool never mixes two policies); gen is the new pools'
// generation.
func publishPolicy(t *testing.T, f *fleet, p policy, hostOf func(NodeLayout) *fakeHost, gen int64) {
	t.Helper()
	ctx := t.Context()
	mode, layout := dra.PartitionsStatic, p.layout
	if p.layout == nil {
		mode, layout = dra.PartitionsDynamic, Uniform(0)
	}
	h := hostOf(layout)
	require.NoError(t, f.client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	require.Eventually(t, func() bool {
		l, err := f.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	}, time.Minute, 50*time.Millisecond, "old ResourceSlices deleted")
	require.NoError(t, forEach(len(f.nodes), func(i int) error {
		n := f.nodes[i]
		d, err := dra.New(dra.Config{
			NodeName:   n.name,
			SpecDirs:   []string{h.specDir},
			Partitions: mode,
			Discover:   func() (*discover.Host, error) { return discover.Discover(h.tree.DiscoverOptions()...) },
		})
		if err != nil {
			return fmt.Errorf("driver of node %s: %w", n.name, err)
		}
		d.Refresh()
		for _, s := range d.Slices() {
			s.Spec.Pool.Generation = gen
			if _, err := f.client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating ResourceSlice %s: %w", s.Name, err)
			}
		}
		return nil
	}))
	if mode == dra.PartitionsDynamic {
		// The API server drops compatibilityGroups when its gate is off:
		// dynamic mode would then be measured without its rule.
		l, err := f.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		groups := 0
		for _, s := range l.Items {
			for _, d := range s.Spec.Devices {
				for _, c := range d.ConsumesCounters {
					groups += len(c.CompatibilityGroups)
				}
			}
		}
		require.Positive(t, groups, "the API server kept no compatibilityGroups: is %s on?", compatibilityGate)
	}
}

// capacityGiB is the memory capacity of a device of a slice, in GiB.
func capacityGiB(d resourceapi.Device) int {
	q, ok := d.Capacity[dra.CapacityMemory]
	if !ok {
		return 0
	}
	return int(q.Value.Value() >> 30)
}

// sizes are the jobs' ResourceClaimTemplates: one device of class
// xpu.baidu.com with at least the job's memory.
var sizes = []int{1, 2, 4}

func sizeTemplate(ns string, vfs int) *resourceapi.ResourceClaimTemplate {
	gib := CardGiB / vfs
	r := exactly(classAll, 1, fmt.Sprintf(`device.capacity["xpu.baidu.com"].memory.compareTo(quantity("%dGi")) >= 0`, gib))
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: sizeName(vfs), Namespace: ns},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{*r}}}},
	}
}

func jobPod(ns string, j Job) *corev1.Pod {
	p := Case{Request: &resourceapi.DeviceRequest{}}.pod(ns, fmt.Sprintf("job-%05d-%s", j.ID, j.SizeName()))
	tpl := sizeName(j.VFs)
	p.Spec.ResourceClaims[0].ResourceClaimTemplateName = &tpl
	p.Labels["app"] = "xpu-utilization"
	return p
}

// tracker is what a run saw: bindings, the device of each claim, the
// deletions sent.
type tracker struct {
	mu       sync.Mutex
	bound    map[string]time.Time
	released map[string]time.Time
	device   map[string]string // pod -> device name
	timers   []*time.Timer
	errs     []error
}

// runTrace plays jobs in namespace ns: each pod is created at its arrival,
// deleted its duration after its binding was seen, until the span's
// horizon; then the namespace is emptied.
func runTrace(t *testing.T, c *harness.Cluster, f *fleet, ns string, jobs []Job, span Span) UtilResult {
	t.Helper()
	ctx := t.Context()
	client := f.client
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, time.Minute, 100*time.Millisecond, "service account %s/default", ns)
	for _, v := range sizes {
		_, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, sizeTemplate(ns, v), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	byName := map[string]Job{}
	for _, j := range jobs {
		byName[jobPod(ns, j).Name] = j
	}
	deviceGiB := map[string]int{}
	published, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range published.Items {
		for _, d := range s.Spec.Devices {
			deviceGiB[d.Name] = capacityGiB(d)
		}
	}

	tr := &tracker{bound: map[string]time.Time{}, released: map[string]time.Time{}, device: map[string]string{}}
	del := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	onPod := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if _, seen := tr.bound[p.Name]; seen {
			return
		}
		tr.bound[p.Name] = now
		name := p.Name
		tr.timers = append(tr.timers, time.AfterFunc(byName[name].Duration, func() {
			sent := time.Now()
			err := client.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), name, del)
			tr.mu.Lock()
			defer tr.mu.Unlock()
			tr.released[name] = sent
			if err != nil && !apierrors.IsNotFound(err) {
				tr.errs = append(tr.errs, fmt.Errorf("deleting pod %s/%s: %w", ns, name, err))
			}
		}))
	}
	onClaim := func(obj any) {
		cl, ok := obj.(*resourceapi.ResourceClaim)
		if !ok || cl.Status.Allocation == nil || len(cl.Status.Allocation.Devices.Results) == 0 {
			return
		}
		for _, o := range cl.OwnerReferences {
			if o.Kind == "Pod" {
				tr.mu.Lock()
				tr.device[o.Name] = cl.Status.Allocation.Devices.Results[0].Device
				tr.mu.Unlock()
			}
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods().Informer()
	_, err = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, n any) { onPod(n) }})
	require.NoError(t, err)
	claims := factory.Resource().V1().ResourceClaims().Informer()
	_, err = claims.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onClaim, UpdateFunc: func(_, n any) { onClaim(n) }})
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	require.True(t, cache.WaitForCacheSync(stop, pods.HasSynced, claims.HasSynced))

	before := readUsage(t, c)
	start := time.Now()
	end := start.Add(span.Horizon)
	var g errgroup.Group
	g.SetLimit(writers)
	for _, j := range jobs {
		time.Sleep(time.Until(start.Add(j.Arrival)))
		p := jobPod(ns, j)
		g.Go(func() error {
			if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating pod %s/%s: %w", ns, p.Name, err)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	time.Sleep(time.Until(end))
	after := readUsage(t, c)
	tr.mu.Lock()
	for _, tm := range tr.timers {
		tm.Stop()
	}
	r := UtilResult{
		Jobs: len(jobs), HorizonSeconds: span.Horizon.Seconds(), PlacedBySize: map[string]int{},
		WindowFromSeconds: span.From.Seconds(), WindowToSeconds: span.To.Seconds(),
	}
	var waits []time.Duration
	var gibSeconds float64
	for name, j := range byName {
		arrival := start.Add(j.Arrival)
		b, ok := tr.bound[name]
		if !ok || !b.Before(end) {
			r.Waiting++
			waits = append(waits, end.Sub(arrival))
			continue
		}
		r.Placed++
		r.PlacedBySize[j.SizeName()]++
		waits = append(waits, b.Sub(arrival))
		rel, ok := tr.released[name]
		if !ok || rel.After(end) {
			rel = end
		}
		gibSeconds += span.gibSeconds(j.GiB(), b.Sub(start), rel.Sub(start))
		if dev, ok := tr.device[name]; ok && deviceGiB[dev] > j.GiB() {
			r.LargerSlot++
		}
	}
	errs := tr.errs
	tr.mu.Unlock()
	require.Empty(t, errs)
	r.Utilisation = utilisation(gibSeconds, len(f.nodes)*CardsPerNode, span.To-span.From)
	r.P50WaitMs, r.P99WaitMs = ms(benchstat.Quantile(waits, 0.50)), ms(benchstat.Quantile(waits, 0.99))
	r.SchedulerCPUSeconds = after["kube-scheduler"].CPUSeconds - before["kube-scheduler"].CPUSeconds
	if r.Placed > 0 {
		r.SchedulerCPUPerPod = 1000 * r.SchedulerCPUSeconds / float64(r.Placed)
	}
	r.Load1 = load1()
	cleanCase(t, client, ns)
	return r
}
