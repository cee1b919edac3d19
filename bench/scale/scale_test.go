package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/benchstat"
	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// The client QPS of the bench's client and of the scheduler and the
// controller manager (their defaults, 50 and 20, would measure the rate
// limiters; upstream's scheduler_perf raises them too).
const clientQPS = 5000

// stallTimeout ends a case when no pod bound for this long.
const stallTimeout = 90 * time.Second

// settle lets the scheduler's informers take in what a case set up
// (nodes' capacity, classes) before the pods come.
const settle = 2 * time.Second

// TestScale is make bench-scale, and with no XPU_SCALE_* variable the small
// run of CI (50 nodes, 200 pods, cases a and b): every pod must bind and
// the report must be written; no time is asserted.
func TestScale(t *testing.T) {
	cfg, err := ConfigFromEnv(os.Getenv)
	require.NoError(t, err)
	harness.RequiresRoot(t)
	out := cfg.Out
	if out == "" {
		out = t.TempDir()
	}
	rep := &Report{Started: time.Now(), KubernetesVersion: harness.KubernetesVersion, CPUs: runtime.NumCPU()}
	rep.Notes = append(rep.Notes, fmt.Sprintf("load average at the start: %.1f", load1()))
	p800 := newFakeHost(t, fakehost.P800Sysfs())
	var vf *fakeHost
	if slicesContainPartitioned(cfg.Cases) {
		vf = newFakeHost(t, sriovP800x8())
	}
	for _, n := range cfg.Nodes {
		t.Run(fmt.Sprintf("nodes=%d", n), func(t *testing.T) {
			rep.Results = append(rep.Results, runNodeCount(t, cfg, n, p800, vf)...)
		})
		// Written after every node count: a long sweep keeps what it
		// measured if a later count fails.
		require.NoError(t, rep.Write(out))
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("load average at the end: %.1f", load1()))
	require.NoError(t, rep.Write(out))
	t.Logf("report: %s", filepath.Join(out, "scale-results.md"))

	data, err := os.ReadFile(filepath.Join(out, "scale-results.json"))
	require.NoError(t, err)
	var back []Result
	require.NoError(t, json.Unmarshal(data, &back))
	md, err := os.ReadFile(filepath.Join(out, "scale-results.md"))
	require.NoError(t, err)
	want := 0
	for _, n := range cfg.Nodes {
		for _, l := range cfg.Cases {
			want++
			i := indexOf(back, l, n)
			require.GreaterOrEqual(t, i, 0, "case %s at %d nodes missing from the JSON report", l, n)
			require.Equal(t, cfg.Pods, back[i].Bound, "case %s at %d nodes: pods bound", l, n)
			require.Contains(t, string(md), "| ("+l+") ")
		}
		want++ // the health change
		require.GreaterOrEqual(t, indexOf(back, HealthCase, n), 0, "health change at %d nodes missing", n)
	}
	require.Len(t, back, want)
}

func slicesContainPartitioned(letters []string) bool {
	for _, l := range letters {
		if c, _ := caseByLetter(l); c.Partitioned {
			return true
		}
	}
	return false
}

func indexOf(rs []Result, c string, nodes int) int {
	for i, r := range rs {
		if r.Case == c && r.Nodes == nodes {
			return i
		}
	}
	return -1
}

// fakeHost is one fake host tree every simulated node's driver reads, with
// the CDI spec directory its drivers check.
type fakeHost struct {
	tree    *fakehost.Tree
	specDir string
	spec    *specs.Spec
}

func newFakeHost(t *testing.T, h fakehost.Host) *fakeHost {
	t.Helper()
	f := &fakeHost{tree: fakehosttest.Build(t, h), specDir: t.TempDir()}
	host, err := discover.Discover(f.tree.DiscoverOptions()...)
	require.NoError(t, err)
	f.spec, _, err = cdispec.New(host, cdispec.Settings{NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex}, NoHooks: true})
	require.NoError(t, err)
	f.writeSpec(t, true)
	return f
}

// writeSpec writes the node spec xpu-cdi generate writes, or (healthy
// false) one without the device of /dev/xpu0: the driver then taints
// xpu-0, as it does on a node whose spec lost a device.
func (f *fakeHost) writeSpec(t *testing.T, healthy bool) {
	t.Helper()
	s := *f.spec
	if !healthy {
		s.Devices = nil
		for _, d := range f.spec.Devices {
			if d.Name != "0" {
				s.Devices = append(s.Devices, d)
			}
		}
		require.Len(t, s.Devices, len(f.spec.Devices)-1, "the spec has no device named 0")
	}
	require.NoError(t, cdispec.WriteFile(filepath.Join(f.specDir, "baidu.com-xpu.yaml"), &s, cdispec.FormatYAML))
}

func (f *fakeHost) driver(t *testing.T, node string, mode dra.PartitionMode) *dra.Driver {
	t.Helper()
	d, err := dra.New(dra.Config{
		NodeName:   node,
		SpecDirs:   []string{f.specDir},
		Partitions: mode,
		Discover:   func() (*discover.Host, error) { return discover.Discover(f.tree.DiscoverOptions()...) },
	})
	require.NoError(t, err)
	return d
}

// runNodeCount starts a control plane, creates n simulated nodes with
// their slices, runs the cases and the health change.
func runNodeCount(t *testing.T, cfg Config, n int, p800, vf *fakeHost) []Result {
	qps := fmt.Sprint(clientQPS)
	opts := []harness.ClusterOption{
		harness.WithControlPlaneOnly(),
		harness.WithComponentFlags("kube-scheduler", "--kube-api-qps="+qps, "--kube-api-burst="+qps),
		harness.WithComponentFlags("kube-controller-manager", "--kube-api-qps="+qps, "--kube-api-burst="+qps),
	}
	if vf != nil {
		// Case f's dynamic slice: without the gate the API server drops
		// compatibilityGroups and the scheduler ignores the devices.
		opts = append(opts, harness.WithFeatureGates(compatibilityGate))
	}
	c := harness.NewCluster(t, opts...)
	rc := rest.CopyConfig(c.Config)
	rc.QPS, rc.Burst = clientQPS, clientQPS
	client, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	ctx := t.Context()

	f := &fleet{client: client}
	for i := range n {
		f.nodes = append(f.nodes, &simNode{name: NodeName(i), driver: p800.driver(t, NodeName(i), dra.PartitionsStatic)})
	}
	start := time.Now()
	require.NoError(t, f.createNodes(ctx))
	require.Equal(t, n, f.refresh(), "every driver's first scan gives a slice")
	_, err = f.publish(ctx)
	require.NoError(t, err)
	t.Logf("%d nodes Ready with their ResourceSlices in %s", n, time.Since(start).Round(time.Millisecond))
	for _, nd := range f.nodes[:1] {
		require.Equal(t, DevicesPerNode, nd.devices(), "the P800 host's slice")
	}

	var results []Result
	classes, healthDone := false, false
	for _, l := range cfg.Cases {
		cs, _ := caseByLetter(l)
		if cs.DRA && !classes {
			createDeviceClasses(t, client)
			classes = true
		}
		if cs.Partitioned && !healthDone {
			results = append(results, healthChange(t, c, f, p800))
			healthDone = true
		}
		if cs.Partitioned {
			for _, nd := range f.nodes {
				nd.driver = vf.driver(t, nd.name, dra.PartitionsDynamic)
			}
			require.Equal(t, n, f.refresh())
			_, err := f.publish(ctx)
			require.NoError(t, err)
			require.Equal(t, DynamicDevicesPerNode, f.nodes[0].devices(), "the dynamic slices of 8 SR-IOV P800")
		}
		results = append(results, runCase(t, c, f, cs, cfg.Pods))
	}
	if !healthDone {
		results = append(results, healthChange(t, c, f, p800))
	}
	return results
}

// createDeviceClasses creates the DeviceClasses of
// deployments/xpu-dra-deviceclasses.yaml, the file users apply.
func createDeviceClasses(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	path := filepath.Join("..", "..", "deployments", "xpu-dra-deviceclasses.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var dc resourceapi.DeviceClass
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &dc), "%s", path)
		if dc.Kind == "" {
			continue // a document of comments only (make manifests' header)
		}
		_, err := client.ResourceV1().DeviceClasses().Create(t.Context(), &dc, metav1.CreateOptions{})
		require.NoError(t, err, "creating DeviceClass %s", dc.Name)
	}
}

// usage reads the CPU time and peak RSS of the components.
type usage map[string]ProcUsage

var measured = []string{"kube-scheduler", "kube-apiserver", "kube-controller-manager"}

func readUsage(t *testing.T, c *harness.Cluster) usage {
	t.Helper()
	u := usage{}
	for _, name := range measured {
		pu, err := ReadProcUsage("/proc", c.ProcessID(name))
		require.NoError(t, err, name)
		u[name] = pu
	}
	return u
}

func resetPeaks(t *testing.T, c *harness.Cluster) {
	t.Helper()
	for _, name := range measured {
		require.NoError(t, ResetPeakRSS("/proc", c.ProcessID(name)), name)
	}
}

// fillUsage sets the CPU seconds between before and after, the peak RSS
// of after, etcd's size and the slices' bytes.
func fillUsage(t *testing.T, c *harness.Cluster, client kubernetes.Interface, r *Result, before, after usage) {
	t.Helper()
	r.SchedulerCPUSeconds = after["kube-scheduler"].CPUSeconds - before["kube-scheduler"].CPUSeconds
	r.SchedulerPeakRSSBytes = after["kube-scheduler"].PeakRSSBytes
	r.APIServerCPUSeconds = after["kube-apiserver"].CPUSeconds - before["kube-apiserver"].CPUSeconds
	r.APIServerPeakRSSBytes = after["kube-apiserver"].PeakRSSBytes
	r.ControllerManagerCPUSeconds = after["kube-controller-manager"].CPUSeconds - before["kube-controller-manager"].CPUSeconds
	var err error
	r.EtcdDBBytes, r.EtcdDBInUseBytes, err = etcdDBSize(t.Context(), c.EtcdURL)
	require.NoError(t, err)
	r.ResourceSlices, r.ResourceSliceBytes, err = sliceBytes(t.Context(), client)
	require.NoError(t, err)
	r.Load1 = load1()
}

// runCase creates the case's pods in a namespace of its own and waits
// until every one is bound (or none binds for stallTimeout).
func runCase(t *testing.T, c *harness.Cluster, f *fleet, cs Case, pods int) Result {
	t.Helper()
	ctx := t.Context()
	client := f.client
	ns := "scale-" + cs.Letter
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, time.Minute, 100*time.Millisecond, "service account %s/default", ns)
	if cs.NodeCapacity {
		require.NoError(t, f.setCapacity(ctx, int64(cs.devicesPerNode())))
		defer func() { require.NoError(t, f.setCapacity(context.WithoutCancel(ctx), 0)) }()
	}
	if tpl := cs.template(ns); tpl != nil {
		_, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tpl, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	var (
		mu    sync.Mutex
		bound = map[string]time.Time{}
	)
	see := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		mu.Lock()
		if _, seen := bound[p.Name]; !seen {
			bound[p.Name] = now
		}
		mu.Unlock()
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, n any) { see(n) }})
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	require.True(t, cache.WaitForCacheSync(stop, inf.HasSynced))
	time.Sleep(settle)

	resetPeaks(t, c)
	before := readUsage(t, c)
	var cmu sync.Mutex
	created := map[string]time.Time{}
	require.NoError(t, forEach(pods, func(i int) error {
		p := cs.pod(ns, fmt.Sprintf("pod-%05d", i))
		sent := time.Now()
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", ns, p.Name, err)
		}
		cmu.Lock()
		created[p.Name] = sent
		cmu.Unlock()
		return nil
	}))
	last, lastChange := 0, time.Now()
	for {
		mu.Lock()
		got := len(bound)
		mu.Unlock()
		if got >= pods {
			break
		}
		if got != last {
			last, lastChange = got, time.Now()
		}
		if time.Since(lastChange) > stallTimeout {
			t.Errorf("case %s at %d nodes: %d of %d pods bound, none more for %s; %s", cs.Letter, len(f.nodes), got, pods, stallTimeout, pendingReason(ctx, client, ns))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	after := readUsage(t, c)

	mu.Lock()
	lat, first, lastBound := latencies(created, bound)
	mu.Unlock()
	r := Result{Case: cs.Letter, Title: cs.Title, Nodes: len(f.nodes), Pods: pods, Bound: len(lat)}
	if len(lat) > 0 && lastBound.After(first) {
		r.PodsPerSecond = float64(len(lat)) / lastBound.Sub(first).Seconds()
		r.P50Ms, r.P99Ms = ms(benchstat.Quantile(lat, 0.50)), ms(benchstat.Quantile(lat, 0.99))
	}
	fillUsage(t, c, client, &r, before, after)
	t.Logf("case %s at %d nodes: %d/%d bound, %.1f pods/s, p50 %.0f ms, p99 %.0f ms, scheduler %.1f CPU s", cs.Letter, r.Nodes, r.Bound, pods, r.PodsPerSecond, r.P50Ms, r.P99Ms, r.SchedulerCPUSeconds)
	cleanCase(t, client, ns)
	return r
}

// pendingReason is the PodScheduled message of one unbound pod.
func pendingReason(ctx context.Context, client kubernetes.Interface, ns string) string {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Sprintf("no unbound pod listed (%v)", err)
	}
	p := pods.Items[0]
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return fmt.Sprintf("pod %s: %s: %s", p.Name, cond.Reason, cond.Message)
		}
	}
	return fmt.Sprintf("pod %s: no PodScheduled condition", p.Name)
}

// cleanCase deletes the case's pods and claims and waits until they are
// gone, so that the next case finds every device free.
func cleanCase(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	zero := int64(0)
	del := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	require.NoError(t, client.CoreV1().Pods(ns).DeleteCollection(ctx, del, metav1.ListOptions{}))
	require.Eventually(t, func() bool {
		_ = client.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, del, metav1.ListOptions{})
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) > 0 {
			return false
		}
		claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0
	}, 3*time.Minute, 250*time.Millisecond, "pods and claims of %s deleted", ns)
}

// healthChange taints xpu-0 of every node through the drivers (their spec
// loses the device), then untaints it, and measures the writes and the
// time until a watch of the slices saw each change everywhere.
func healthChange(t *testing.T, c *harness.Cluster, f *fleet, h *fakeHost) Result {
	t.Helper()
	ctx := t.Context()
	key := f.nodes[0].driver.TaintKey()
	tainted := func(s *resourceapi.ResourceSlice) bool {
		for _, d := range s.Spec.Devices {
			if d.Name == names.DRADevice(0) {
				for _, tn := range d.Taints {
					if tn.Key == key {
						return true
					}
				}
			}
		}
		return false
	}
	factory := informers.NewSharedInformerFactory(f.client, 0)
	inf := factory.Resource().V1().ResourceSlices().Informer()
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	require.True(t, cache.WaitForCacheSync(stop, inf.HasSynced))
	everywhere := func(want bool) func() bool {
		return func() bool {
			items := inf.GetStore().List()
			if len(items) < len(f.nodes) {
				return false
			}
			for _, o := range items {
				if tainted(o.(*resourceapi.ResourceSlice)) != want {
					return false
				}
			}
			return true
		}
	}
	r := Result{Case: HealthCase, Title: "one XPU of every node tainted, then untainted", Nodes: len(f.nodes)}
	resetPeaks(t, c)
	before := readUsage(t, c)
	change := func(healthy bool) (int, float64) {
		h.writeSpec(t, healthy)
		require.Equal(t, len(f.nodes), f.refresh(), "every driver sees the change")
		start := time.Now()
		writes, err := f.publish(ctx)
		require.NoError(t, err)
		require.Eventually(t, everywhere(!healthy), 5*time.Minute, 10*time.Millisecond)
		return writes, time.Since(start).Seconds()
	}
	r.TaintWrites, r.TaintSeconds = change(false)
	r.UntaintWrites, r.UntaintSeconds = change(true)
	fillUsage(t, c, f.client, &r, before, readUsage(t, c))
	t.Logf("health change at %d nodes: taint %d writes %.2f s, untaint %d writes %.2f s", r.Nodes, r.TaintWrites, r.TaintSeconds, r.UntaintWrites, r.UntaintSeconds)
	return r
}
