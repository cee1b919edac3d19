package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// The tests of this file run xpu-dra-driver --partitions=dynamic against the
// test cluster (real kube-apiserver, kube-scheduler and kubelet on
// containerd 2.x) with DRADeviceCompatibilityGroups on, on a fake P800 host
// served by the fake SR-IOV kernel (FUSE): the scheduler chooses a whole
// card, a half or a quarter from the counters and compatibility groups the
// driver publishes, and the driver cuts the card when the kubelet prepares
// the claim. The driver runs on the host, as the node's daemon, so that a
// test can kill it mid-way and start it again on the same state.

// dynamicGate is the gate dynamic mode needs beyond what 1.37 has on.
var dynamicGate = dra.GateDeviceCompatibilityGroups + "=true"

// p800Cards is fakehost.P800x8SRIOV with its first n cards (0000:01:00.0
// up, in PCI address order = /dev/xpuN order), all whole.
func p800Cards(n int) fakehost.Host {
	h := fakehost.P800x8SRIOV()
	h.Devices = h.Devices[:n]
	return h
}

// dynNode is the test cluster's node with the fake SR-IOV host and the
// driver in dynamic mode running on the host.
type dynNode struct {
	// draCluster has no DaemonSet: the driver runs on the host.
	*draCluster
	kernel *fakehost.SRIOVKernel
	// bin and args are the driver's command line; driver is the running
	// one.
	bin    string
	args   []string
	mu     sync.Mutex
	driver *exec.Cmd
	exited chan struct{}
	// log is every run's output, in order.
	log syncBuffer
}

// startDynamic builds the fake host of n cards, starts the fake SR-IOV
// kernel on it, the cluster with the gate, writes the node spec and starts
// the driver with extra flags.
func startDynamic(t *testing.T, n int, extra ...string) *dynNode {
	t.Helper()
	return startDynamicWith(t, n, fakehost.SRIOVOptions{}, extra...)
}

// startDynamicWith is startDynamic with the fake kernel's options.
func startDynamicWith(t *testing.T, n int, kernel fakehost.SRIOVOptions, extra ...string) *dynNode {
	t.Helper()
	harness.RequiresRoot(t)
	d := &dynNode{draCluster: &draCluster{tree: FakeHost(t, p800Cards(n))}}
	d.kernel = fakehosttest.StartSRIOV(t, d.tree, kernel)
	d.Cluster = harness.NewCluster(t, harness.WithClusterRuntime(clusterRuntimes[0].start), harness.WithFeatureGates(dynamicGate))
	d.vendor = harness.UniqueVendor(t)
	// The node spec of the whole cards, as xpu-cdi-refresh writes it at
	// boot; the driver writes it again after each re-layout.
	d.Runtime.WriteSpec(t, GenerateSpec(t, d.tree, d.vendor), d.vendor)
	d.image = d.BusyboxImage(t)
	classes, err := os.ReadFile(filepath.Join(moduleRoot(t), "deployments", "xpu-dra-deviceclasses.yaml"))
	require.NoError(t, err)
	d.Apply(t, string(classes))
	d.dataDir = filepath.Join(d.PluginsDir(), "xpu.baidu.com")
	require.NoError(t, os.MkdirAll(d.dataDir, 0o750))
	d.bin = Binary(t, "xpu-dra-driver")
	d.args = append([]string{
		"--kubeconfig", d.Kubeconfig, "--node-name", d.Node,
		"--dev-root", d.tree.Root, "--driver-root", d.tree.Root,
		"--vendor", d.vendor, "--cdi-spec-dir", d.SpecDir(),
		"--health-address", "127.0.0.1:0", "--poll-interval", "500ms",
		"--plugin-data-dir", d.dataDir, "--plugin-registry-dir", d.PluginsRegistryDir(),
		"--pod-resources-socket", filepath.Join(d.KubeletRootDir, "pod-resources", "kubelet.sock"),
		"--partitions", "dynamic",
	}, extra...)
	// Registered after the cluster's: runs before it, so that the pods'
	// claims are unprepared while the driver still serves them.
	t.Cleanup(func() { d.cleanup(t) })
	d.start(t)
	d.waitPublished(t, n)
	return d
}

// start starts the driver on the host and waits for its start line.
func (d *dynNode) start(t *testing.T) {
	t.Helper()
	runs := strings.Count(d.log.String(), startLine)
	require.NoError(t, d.startProcess())
	testutil.Eventually(t, func(t testing.TB) bool {
		return assert.Greater(t, strings.Count(d.log.String(), startLine), runs, "the driver's start line")
	}, podTimeout, 100*time.Millisecond, "the driver did not start:\n%s", &d.log)
}

// startLine is what the driver logs once it serves the kubelet.
const startLine = "rolling updates off"

// startProcess starts the driver on the host, without waiting: what a
// goroutine may call.
func (d *dynNode) startProcess() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	cmd := exec.Command(d.bin, d.args...)
	cmd.Stdout, cmd.Stderr = &d.log, &d.log
	if err := cmd.Start(); err != nil {
		return err
	}
	d.driver, d.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(d.exited)
	return nil
}

// cleanup deletes the test's pods while the driver still unprepares their
// claims, then stops the driver.
func (d *dynNode) cleanup(t *testing.T) {
	ctx := context.Background()
	zero := int64(0)
	if err := d.Client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Logf("deleting the test's pods: %v", err)
	}
	for end := time.Now().Add(podTimeout); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		pods, err := d.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			break
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.driver.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		_ = d.driver.Process.Kill()
		<-d.exited
	}
	if t.Failed() {
		t.Logf("driver log:\n%s", d.log.String())
	}
}

// waitPublished waits until the node's slices hold the n cards' 7 devices
// each (whole, 2 halves, 4 quarters) and their counter sets.
func (d *dynNode) waitPublished(t *testing.T, n int) {
	t.Helper()
	var devs, sets int
	testutil.Eventually(t, func(t testing.TB) bool {
		l, err := d.Client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + d.Node})
		if !assert.NoError(t, err) {
			return false
		}
		devs, sets = 0, 0
		for _, s := range l.Items {
			if s.Spec.Driver == "xpu.baidu.com" {
				devs += len(s.Spec.Devices)
				sets += len(s.Spec.SharedCounters)
			}
		}
		return assert.Equal(t, 7*n, devs) && assert.Equal(t, n+1, sets, "a counter set per card and the handles")
	}, podTimeout, 250*time.Millisecond, "the driver's slices; log:\n%s", &d.log)
}

// card is a card of the fake host by its place in PCI address order.
func (d *dynNode) card(ordinal int) string { return d.kernel.PFs()[ordinal] }

// slot is what a dynamic device name stands for.
type slot struct {
	name  string
	card  int // place in PCI address order
	count int // the card's VF count it needs; 0 for the whole card
	slot  int
}

// parseSlot reads a dynamic device name of a host of up to 8 cards.
func parseSlot(t testing.TB, name string) slot {
	t.Helper()
	s, ok := lookupSlot(name)
	if !ok {
		t.Fatalf("%q is no device name of dynamic mode", name)
	}
	return s
}

// claimOf returns the claim of the pod (its one claim from a template).
func (d *dynNode) claimOf(t testing.TB, pod string) *resourceapi.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	p, err := d.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, p.Status.ResourceClaimStatuses, 1, "pod %s", pod)
	require.NotNil(t, p.Status.ResourceClaimStatuses[0].ResourceClaimName, "pod %s", pod)
	claim, err := d.Client.ResourceV1().ResourceClaims("default").Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	require.NoError(t, err)
	return claim
}

// allocatedSlot returns the one device the pod's claim was allocated.
func (d *dynNode) allocatedSlot(t testing.TB, pod string) slot {
	t.Helper()
	claim := d.claimOf(t, pod)
	require.NotNil(t, claim.Status.Allocation, "claim of %s", pod)
	res := claim.Status.Allocation.Devices.Results
	require.Len(t, res, 1, "claim of %s", pod)
	require.Equal(t, "xpu.baidu.com", res[0].Driver)
	require.Equal(t, d.Node, res[0].Pool)
	return parseSlot(t, res[0].Device)
}

// function returns the PCI address and /dev/xpuN index of the function s
// stands for on the host now: the card's PF, or its VF at position s.slot
// (virtfn N of the PF, as the fake kernel made it).
func (d *dynNode) function(t testing.TB, s slot) (string, int) {
	t.Helper()
	addr := d.card(s.card)
	if s.count > 0 {
		vfs, err := sriov.VirtFns(d.tree.Root, addr)
		require.NoError(t, err)
		require.Len(t, vfs, s.count, "card %s", addr)
		addr = vfs[s.slot]
	}
	for _, dev := range d.kernel.Host().Devices {
		if dev.BDF == addr {
			return addr, dev.Index
		}
	}
	t.Fatalf("the fake kernel has no function %s", addr)
	return "", 0
}

// seesSlot checks that the pod's container has exactly the function of s:
// its node with the host's major:minor, /dev/xpuctrl and its variable; no
// other XPU of the host (not the PF of a VF, not a sibling VF).
func (d *dynNode) seesSlot(t *testing.T, pod string, s slot) {
	t.Helper()
	r := d.Exec(t, "default", pod, "main", "sh", "-c", listXPUs)
	require.True(t, r.Success(), r.String())
	nodes, env := parseNodes(t, r.Stdout)
	addr, idx := d.function(t, s)
	node := fmt.Sprintf("/dev/xpu%d", idx)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(d.tree.Path(node), &st), "the host's %s", node)
	require.Equal(t, uint32(unix.S_IFCHR), st.Mode&unix.S_IFMT, "%s is a char device", node)
	ctrl := fakehost.CtrlMinor
	if d.tree.Host.CtrlMinor != 0 {
		ctrl = d.tree.Host.CtrlMinor
	}
	want := map[string]string{
		"/dev/xpuctrl": fmt.Sprintf("%d:%d", d.tree.Major, ctrl),
		node:           fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)),
	}
	require.Equal(t, want, nodes, "pod %s, device %s (%s)", pod, s.name, addr)
	require.Equal(t, []string{fmt.Sprintf("XPU_CDI_DEVICE_%d=%s", idx, addr)}, env, "pod %s", pod)
}

// numVFs is every card's VF count by its place in PCI address order.
func (d *dynNode) numVFs() []int {
	pfs := d.kernel.PFs()
	out := make([]int, len(pfs))
	for i, pf := range pfs {
		out[i] = d.kernel.NumVFs(pf)
	}
	return out
}

// writesTo is the values written to the card's sriov_numvfs, in order.
func (d *dynNode) writesTo(card int) []string {
	var out []string
	for _, w := range d.kernel.Writes() {
		if w.PF == d.card(card) && w.Errno == 0 {
			out = append(out, w.Value)
		}
	}
	return out
}

// events are the messages of the pod's Warning events.
func (d *dynNode) events(t testing.TB, pod string) []string {
	t.Helper()
	l, err := d.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	require.NoError(t, err)
	var out []string
	for _, e := range l.Items {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// Claim templates of one device by size: the partition attribute, the
// memory (a DeviceClass of deployments/, or a CEL selector), the whole
// card (no partition attribute).
const (
	selHalf    = `"partition" in device.attributes["xpu.baidu.com"] && device.attributes["xpu.baidu.com"].partition == "1/2"`
	selQuarter = `"partition" in device.attributes["xpu.baidu.com"] && device.attributes["xpu.baidu.com"].partition == "1/4"`
	selWhole   = `!("partition" in device.attributes["xpu.baidu.com"])`
)

// selOn selects the partitions of the card at addr (the whole card has
// no parent).
func selOn(addr string) string {
	return fmt.Sprintf(`"parentPCIBusID" in device.attributes["xpu.baidu.com"] && device.attributes["xpu.baidu.com"].parentPCIBusID == %q`, addr)
}

// selQuarterOn selects a quarter (by its memory) of the card at addr.
func selQuarterOn(addr string) []string {
	return []string{`device.capacity["xpu.baidu.com"].memory.compareTo(quantity("24Gi")) == 0`, selOn(addr)}
}

// TestDRADynamicPartitions: on a node of 3 whole P800 cards, the scheduler
// chooses the partition and the driver cuts the card at Prepare.
//   - Pod A asks for a half (by the partition attribute): its card is cut
//     into 2 VFs (the fake kernel's sriov_numvfs), the other cards stay
//     whole, and A's container has exactly its VF's node.
//   - A quarter pinned to A's card (by memory and parentPCIBusID) stays
//     Pending while A runs, although the card's memory has room: the
//     compatibility groups keep quarters off a card holding a half.
//   - Pod B asks for a quarter (the DeviceClass xpu-24gb.baidu.com): it
//     lands on another card, which is cut into 4, and sees its VF.
//   - Pod C asks for a whole card: the third card, still whole; it sees
//     the PF.
//   - Once A is gone the pending quarter gets A's card, which is laid out
//     again (0, then 4), and it sees its VF; after every pod is gone the
//     cards keep their layouts (--idle-layout keep, the default).
func TestDRADynamicPartitions(t *testing.T) {
	start := time.Now()
	d := startDynamic(t, 3)
	t.Logf("cluster and driver up in %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, []int{0, 0, 0}, d.numVFs())

	d.ApplyObjects(t, claimTemplate("half", 1, false, selHalf))
	d.ApplyObjects(t, xpuPod("dyn-a", d.image, "template:half"))
	d.WaitPodRunning(t, "default", "dyn-a", podTimeout)
	a := d.allocatedSlot(t, "dyn-a")
	require.Equal(t, 2, a.count, "pod A: %s", a.name)
	want := []int{0, 0, 0}
	want[a.card] = 2
	require.Equal(t, want, d.numVFs(), "A's card cut in two, the others whole")
	require.Equal(t, []string{"2"}, d.writesTo(a.card))
	d.seesSlot(t, "dyn-a", a)

	// A quarter of A's card cannot be placed while A holds a half of it.
	d.ApplyObjects(t, claimTemplate("quarter-of-a", 1, false, selQuarterOn(d.card(a.card))...))
	d.ApplyObjects(t, xpuPod("dyn-d", d.image, "template:quarter-of-a"))
	msg := d.waitPending(t, "dyn-d")
	require.Contains(t, msg, "cannot allocate all claims", msg)

	d.ApplyObjects(t, classClaimTemplate("quarter", "xpu-24gb.baidu.com"))
	d.ApplyObjects(t, xpuPod("dyn-b", d.image, "template:quarter"))
	d.WaitPodRunning(t, "default", "dyn-b", podTimeout)
	b := d.allocatedSlot(t, "dyn-b")
	require.Equal(t, 4, b.count, "pod B: %s", b.name)
	require.NotEqual(t, a.card, b.card, "pod B (%s) on another card than A (%s)", b.name, a.name)
	want[b.card] = 4
	require.Equal(t, want, d.numVFs())
	d.seesSlot(t, "dyn-b", b)

	d.ApplyObjects(t, claimTemplate("whole", 1, false, selWhole))
	d.ApplyObjects(t, xpuPod("dyn-c", d.image, "template:whole"))
	d.WaitPodRunning(t, "default", "dyn-c", podTimeout)
	c := d.allocatedSlot(t, "dyn-c")
	require.Zero(t, c.count, "pod C: %s", c.name)
	require.Equal(t, 3-a.card-b.card, c.card, "pod C on the third card")
	require.Equal(t, want, d.numVFs(), "the whole card is not laid out")
	require.Empty(t, d.writesTo(c.card))
	d.seesSlot(t, "dyn-c", c)
	require.Equal(t, corev1.PodPending, d.podPhase(t, "dyn-d"), "the quarter of A's card still waits")

	// A ends: the waiting quarter gets A's card, laid out again.
	gone := time.Now()
	d.deletePod(t, "dyn-a")
	d.WaitPodRunning(t, "default", "dyn-d", podTimeout)
	t.Logf("the quarter ran on A's card %s after A's deletion", time.Since(gone).Round(time.Millisecond))
	q := d.allocatedSlot(t, "dyn-d")
	require.Equal(t, a.card, q.card, "the quarter on A's card: %s", q.name)
	require.Equal(t, 4, q.count)
	want[a.card] = 4
	require.Equal(t, want, d.numVFs())
	require.Equal(t, []string{"2", "0", "4"}, d.writesTo(a.card), "A's card: halves, then 0, then quarters")
	d.seesSlot(t, "dyn-d", q)

	for _, pod := range []string{"dyn-b", "dyn-c", "dyn-d"} {
		d.deletePod(t, pod)
	}
	testutil.Eventually(t, func(t testing.TB) bool { return assert.Empty(t, d.records(t)) }, podTimeout, 250*time.Millisecond, "claims unprepared")
	require.Equal(t, want, d.numVFs(), "idle cards keep their layout (--idle-layout keep)")
	for _, e := range append(d.events(t, "dyn-b"), d.events(t, "dyn-c")...) {
		require.NotContains(t, e, "Prepare", "no Prepare failed")
	}
	t.Logf("TestDRADynamicPartitions took %s", time.Since(start).Round(time.Millisecond))
}

// podPhase is the pod's phase now.
func (d *dynNode) podPhase(t testing.TB, name string) corev1.PodPhase {
	t.Helper()
	p, err := d.Client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p.Status.Phase
}

// TestDRADynamicGateOff runs xpu-dra-driver --partitions=dynamic against
// the test cluster's real API server (control plane only) with
// DRADeviceCompatibilityGroups off: the driver refuses to start, its
// message names the gate and the two components that need it, and it
// publishes no slice and writes no card's sriov_numvfs.
func TestDRADynamicGateOff(t *testing.T) {
	tree := FakeHost(t, p800Cards(2))
	before := fakehosttest.Snapshot(t, tree)
	c := harness.NewCluster(t, harness.WithControlPlaneOnly(), harness.WithFeatureGates(dra.GateDeviceCompatibilityGroups+"=false"))
	data, reg := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := Binary(t, "xpu-dra-driver")
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin,
		"--kubeconfig", c.Kubeconfig, "--node-name", "node-1",
		"--dev-root", tree.Root, "--driver-root", tree.Root, "--cdi-spec-dir", t.TempDir(),
		"--health-address", "127.0.0.1:0", "--plugin-data-dir", data, "--plugin-registry-dir", reg,
		"--partitions", "dynamic").CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the driver must exit, refusing:\n%s", out)
	require.NotEqual(t, 0, exit.ExitCode())
	t.Logf("refused in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	require.Contains(t, string(out), dra.GateDeviceCompatibilityGroups+"=true")
	require.Contains(t, string(out), "kube-apiserver")
	require.Contains(t, string(out), "kube-scheduler")
	published, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, published.Items, "nothing published")
	require.Equal(t, before, fakehosttest.Snapshot(t, tree), "no sriov_numvfs written")
}

// holdCard starts a real process (sleep) on the host holding the node at
// the in-tree path node open (an O_PATH descriptor: no driver serves the
// fake node's device number, so a plain open would fail), and shows it in
// the fake host's /proc: the real /proc/PID bind-mounted at <root>/proc/PID,
// which is where the driver's check of the processes holding a card looks
// (its dev root stands for the host's /). It returns the process's pid; the
// process and the mount go at cleanup, or at release.
func holdCard(t *testing.T, tree *fakehost.Tree, node string) (pid int, release func()) {
	t.Helper()
	fd, err := unix.Open(tree.Path(node), unix.O_PATH|unix.O_CLOEXEC, 0)
	require.NoError(t, err, "opening %s", node)
	f := os.NewFile(uintptr(fd), tree.Path(node))
	cmd := exec.Command("sleep", "3600")
	cmd.ExtraFiles = []*os.File{f}
	require.NoError(t, cmd.Start())
	require.NoError(t, f.Close())
	pid = cmd.Process.Pid
	dir := tree.Path("/proc/" + strconv.Itoa(pid))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, unix.Mount("/proc/"+strconv.Itoa(pid), dir, "", unix.MS_BIND, ""))
	var once sync.Once
	release = func() {
		once.Do(func() {
			assert.NoError(t, unix.Unmount(dir, unix.MNT_DETACH))
			assert.NoError(t, os.Remove(dir))
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(release)
	return pid, release
}

// TestDRADynamicHeldCard: a process on the host holds the PF node of a
// whole card; a claim for a half of that card (pinned by parentPCIBusID)
// is allocated by the scheduler, which cannot know, but the driver refuses
// to cut the card: the pod's event names the process and its node, the
// card keeps 0 VFs and nothing is written to its sriov_numvfs, while the
// other card is untouched too. Once the process is gone the kubelet's
// retry prepares the claim: the card is cut and the pod runs with its VF.
func TestDRADynamicHeldCard(t *testing.T) {
	start := time.Now()
	d := startDynamic(t, 2)
	pid, release := holdCard(t, d.tree, "/dev/xpu0")
	addr := d.card(0)
	d.ApplyObjects(t, claimTemplate("half-of-0", 1, false, selHalf, selOn(addr)))
	d.ApplyObjects(t, xpuPod("dyn-held", d.image, "template:half-of-0"))

	holder := fmt.Sprintf("pid %d (sleep) holding /dev/xpu0", pid)
	var seen []string
	testutil.Eventually(t, func(t testing.TB) bool {
		seen = d.events(t, "dyn-held")
		return assert.True(t, slices.ContainsFunc(seen, func(e string) bool { return strings.Contains(e, holder) }), "an event naming %q: %q", holder, seen)
	}, podTimeout, 500*time.Millisecond, "the pod's events")
	t.Logf("events: %q", seen)
	require.Equal(t, corev1.PodPending, d.podPhase(t, "dyn-held"))
	require.Equal(t, []int{0, 0}, d.numVFs(), "nothing changed")
	require.Empty(t, d.kernel.Writes(), "nothing written")
	require.Empty(t, d.records(t), "no claim prepared")

	release()
	d.WaitPodRunning(t, "default", "dyn-held", podTimeout)
	s := d.allocatedSlot(t, "dyn-held")
	require.Equal(t, slot{name: s.name, card: 0, count: 2, slot: s.slot}, s)
	require.Equal(t, []int{2, 0}, d.numVFs())
	d.seesSlot(t, "dyn-held", s)
	d.deletePod(t, "dyn-held")
	t.Logf("TestDRADynamicHeldCard took %s", time.Since(start).Round(time.Millisecond))
}

// lookupSlot reads a dynamic device name of a host of up to 8 cards.
func lookupSlot(name string) (slot, bool) {
	for c := range 8 {
		if name == dra.CardName(c) {
			return slot{name: name, card: c}, true
		}
		for _, n := range []int{2, 4} {
			for s := range n {
				if name == dra.SlotName(c, n, s) {
					return slot{name: name, card: c, count: n, slot: s}, true
				}
			}
		}
	}
	return slot{}, false
}
