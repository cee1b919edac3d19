package dra

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

// kubelet is the kubelet's side of the driver: the plugin helper started
// on a fake API server, and a gRPC client of its DRA socket.
type kubelet struct {
	client *fake.Clientset
	helper *kubeletplugin.Helper
	dra    drapb.DRAPluginClient
}

// shortDir is a temporary directory with a path short enough for unix sockets.
func shortDir(t testing.TB) string { return testutil.ShortDir(t, "xdra") }

func startKubelet(t testing.TB, d *Driver, objs ...runtime.Object) *kubelet {
	t.Helper()
	dir := shortDir(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid-1"}}
	client := fake.NewClientset(append([]runtime.Object{node}, objs...)...)
	ctx, cancel := context.WithCancel(context.Background())
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(d.DriverName()), kubeletplugin.NodeName("node-1"), kubeletplugin.KubeClient(d.ObservedClient(client)),
		kubeletplugin.PluginDataDirectoryPath(dir), kubeletplugin.RegistrarDirectoryPath(dir))
	require.NoError(t, err)
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		helper.Stop()
	})
	return &kubelet{client: client, helper: helper, dra: drapb.NewDRAPluginClient(conn)}
}

// claim is an allocated claim of the devices on pool node-1.
func claim(name string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}
	for i, dev := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "xpu" + string(rune('a'+i)), Driver: names.DRADriver, Pool: "node-1", Device: dev,
		})
	}
	return c
}

func (k *kubelet) create(t testing.TB, c *resourceapi.ResourceClaim) {
	t.Helper()
	_, err := k.client.ResourceV1().ResourceClaims(c.Namespace).Create(context.Background(), c, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (k *kubelet) prepare(t testing.TB, c *resourceapi.ResourceClaim) *drapb.NodePrepareResourceResponse {
	t.Helper()
	resp, err := k.dra.NodePrepareResources(context.Background(), &drapb.NodePrepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}},
	})
	require.NoError(t, err)
	r := resp.GetClaims()[string(c.UID)]
	require.NotNil(t, r, "no answer for claim %s", c.Name)
	return r
}

func (k *kubelet) unprepare(t testing.TB, c *resourceapi.ResourceClaim) string {
	t.Helper()
	resp, err := k.dra.NodeUnprepareResources(context.Background(), &drapb.NodeUnprepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}},
	})
	require.NoError(t, err)
	r := resp.GetClaims()[string(c.UID)]
	require.NotNil(t, r)
	return r.GetError()
}

func cdiIDs(r *drapb.NodePrepareResourceResponse) []string {
	var out []string
	for _, d := range r.GetDevices() {
		out = append(out, d.GetCdiDeviceIds()...)
	}
	return out
}

// records lists the claim records on disk.
func (f *fixture) records(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(f.stateDir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestPrepareUnprepare(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	k := startKubelet(t, f.d)
	a, b := claim("a", "xpu-2"), claim("b", "xpu-2")
	k.create(t, a)
	k.create(t, b)

	r := k.prepare(t, a)
	require.Empty(t, r.GetError())
	require.Equal(t, []string{"baidu.com/xpu=2"}, cdiIDs(r))
	require.Equal(t, "node-1", r.GetDevices()[0].GetPoolName())
	require.Equal(t, "xpu-2", r.GetDevices()[0].GetDeviceName())
	require.Equal(t, []string{"uid-a.json"}, f.records(t))

	// A second pod of the same claim (or a kubelet restart) asks again:
	// the same XPU, nothing rewritten.
	st, err := os.Stat(filepath.Join(f.stateDir, "uid-a.json"))
	require.NoError(t, err)
	r = k.prepare(t, a)
	require.Empty(t, r.GetError())
	require.Equal(t, []string{"baidu.com/xpu=2"}, cdiIDs(r))
	st2, err := os.Stat(filepath.Join(f.stateDir, "uid-a.json"))
	require.NoError(t, err)
	require.Equal(t, st.ModTime(), st2.ModTime())
	require.Equal(t, 1, f.log.Count("prepared claim default/a"))

	// Another claim for the same XPU is the allocator's mistake: refused.
	r = k.prepare(t, b)
	require.Contains(t, r.GetError(), "xpu.baidu.com default/b: request xpua: device xpu-2: the device is prepared for another claim default/a")
	require.Equal(t, []string{"uid-a.json"}, f.records(t))

	// The driver restarts: it still knows a holds xpu-2.
	f.d = f.driver(t)
	k = startKubelet(t, f.d, a, b)
	r = k.prepare(t, b)
	require.Contains(t, r.GetError(), "prepared for another claim default/a")
	require.Equal(t, []string{"uid-a"}, uids(f.d.Prepared()))

	require.Empty(t, k.unprepare(t, a))
	require.Empty(t, f.records(t))
	require.Empty(t, k.unprepare(t, a), "unprepare is idempotent")
	r = k.prepare(t, b)
	require.Empty(t, r.GetError())
	require.Equal(t, []string{"uid-b.json"}, f.records(t))
}

func uids(us []types.UID) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = string(u)
	}
	return out
}

func TestPrepareTwoXPUs(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	k := startKubelet(t, f.d)
	c := claim("two", "xpu-4", "xpu-5")
	k.create(t, c)
	r := k.prepare(t, c)
	require.Empty(t, r.GetError())
	require.Equal(t, []string{"baidu.com/xpu=4", "baidu.com/xpu=5"}, cdiIDs(r))
	require.Equal(t, []string{"xpua"}, r.GetDevices()[0].GetRequestNames())
}

// Each bad claim fails with an error naming the problem, and nothing else
// changes: no record is written, the prepared claim stays.
func TestPrepareBadClaims(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	k := startKubelet(t, f.d)
	good := claim("good", "xpu-0")
	k.create(t, good)
	require.Empty(t, k.prepare(t, good).GetError())

	opaque := claim("opaque", "xpu-1")
	opaque.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"xpua"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: names.DRADriver, Parameters: runtime.RawExtension{Raw: []byte(`{"sharing":"mps"}`)},
		}},
	}}
	otherDriver := claim("other-config", "xpu-1")
	otherDriver.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
		Source:              resourceapi.AllocationConfigSourceClass,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{}`)}}},
	}}
	vanished := claim("vanished", "xpu-9")
	otherPool := claim("other-pool", "xpu-1")
	otherPool.Status.Allocation.Devices.Results[0].Pool = "node-2"
	notAllocated := claim("not-allocated")
	notAllocated.Status.Allocation = nil

	for _, tc := range []struct {
		description string
		claim       *resourceapi.ResourceClaim
		before      func()
		err         string
	}{
		{description: "unknown opaque config", claim: opaque, err: "xpu.baidu.com default/opaque: opaque configuration for this driver is not supported: the FromClaim config of requests [xpua] (this driver takes no parameters"},
		{description: "a device that vanished", claim: vanished, err: "request xpua: device xpu-9 of pool node-1: the device is not on this node (node node-1 has: xpu-0,xpu-1,xpu-2,xpu-3,xpu-4,xpu-5,xpu-6,xpu-7)"},
		{description: "another node's pool", claim: otherPool, err: "device xpu-1 of pool node-2: the device is not on this node"},
		{description: "an XPU in error", claim: claim("error", "xpu-3"), before: func() { f.setState(t, 3, "ERROR") }, err: "request xpua: device xpu-3: the device cannot run work: the driver reports state ERROR"},
		{description: "no spec names it", claim: claim("nospec", "xpu-6"), before: func() {
			require.NoError(t, os.Remove(filepath.Join(f.specDir, "baidu.com-xpu.yaml")))
		}, err: "device xpu-6: no CDI spec names the device: no spec of kind baidu.com/xpu in " + f.specDir + " names baidu.com/xpu=6 (create it with: xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml)"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			k.create(t, tc.claim)
			require.Contains(t, k.prepare(t, tc.claim).GetError(), tc.err)
			require.Equal(t, []string{"uid-good.json"}, f.records(t))
		})
	}
	// The helper refuses a claim that is not allocated before the driver sees it.
	k.create(t, notAllocated)
	_, err := k.dra.NodePrepareResources(context.Background(), &drapb.NodePrepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "default", Name: notAllocated.Name, Uid: string(notAllocated.UID)}},
	})
	require.ErrorContains(t, err, "claim default/not-allocated not allocated")
	require.Equal(t, []string{"uid-good.json"}, f.records(t))

	// A config for another driver is not ours to judge (the spec is gone by now, so it fails on that).
	k.create(t, otherDriver)
	require.NotContains(t, k.prepare(t, otherDriver).GetError(), "opaque")
}

// A claim record lost half-way (a corrupt file) does not stop the driver.
func TestCorruptRecord(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	require.NoError(t, os.WriteFile(filepath.Join(f.stateDir, "uid-x.json"), []byte("{"), 0o600))
	d := f.driver(t)
	require.Empty(t, d.Prepared())
	require.True(t, f.log.Has("ignoring the unreadable claim record "+filepath.Join(f.stateDir, "uid-x.json")), f.log.String())
}

// A claim record is read bounded, like any input: one larger than
// maxClaimRecord is not read whole but ignored with a warning, and the
// driver goes on.
func TestOversizedRecord(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	big := append([]byte(`{"uid":"uid-x","padding":"`), make([]byte, maxClaimRecord)...)
	require.NoError(t, os.WriteFile(filepath.Join(f.stateDir, "uid-x.json"), append(big, '"', '}'), 0o600))
	d := f.driver(t)
	require.Empty(t, d.Prepared())
	require.True(t, f.log.Has("ignoring the unreadable claim record "+filepath.Join(f.stateDir, "uid-x.json")), f.log.String())
	require.True(t, f.log.Has("too large"), f.log.String())
}

// The helper publishes the slice to the API server, owned by the node.
func TestPublishThroughTheHelper(t *testing.T) {
	f := newFixture(t, fakehost.R200SRIOV())
	k := startKubelet(t, f.d)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx, k.helper) }()
	defer func() { cancel(); <-done }()
	var slices *resourceapi.ResourceSliceList
	require.Eventually(t, func() bool {
		var err error
		slices, err = k.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		return err == nil && len(slices.Items) == 1
	}, 10*time.Second, 20*time.Millisecond)
	s := slices.Items[0]
	require.Equal(t, "xpu.baidu.com", s.Spec.Driver)
	require.Equal(t, "node-1", *s.Spec.NodeName)
	require.Equal(t, "node-1", s.Spec.Pool.Name)
	require.Len(t, s.Spec.Devices, 4)
	require.Equal(t, "Node", s.OwnerReferences[0].Kind)
}

// Two drivers share the state directory during a rolling update, and the
// kubelet may prepare a claim through one and unprepare it through the
// other: each call starts from the records on disk.
func TestRollingUpdateDriversShareRecords(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	older, newer := f.d, f.driver(t)
	a, b := claim("a", "xpu-4"), claim("b", "xpu-4")
	prepare := func(d *Driver, c *resourceapi.ResourceClaim) error {
		t.Helper()
		res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
		require.NoError(t, err)
		return res[c.UID].Err
	}
	unprepare := func(d *Driver, c *resourceapi.ResourceClaim) {
		t.Helper()
		res, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{
			{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: c.UID},
		})
		require.NoError(t, err)
		require.NoError(t, res[c.UID])
	}

	// The older driver prepares a after the newer one started.
	require.NoError(t, prepare(older, a))
	require.ErrorIs(t, prepare(newer, b), ErrDeviceInUse, "the newer driver must see a's record")
	// The newer one unprepares a: the older one no longer holds xpu-4.
	unprepare(newer, a)
	require.Empty(t, f.records(t))
	require.NoError(t, prepare(older, b), "the older driver must see that a is gone")
	require.Equal(t, []string{"uid-b.json"}, f.records(t))
}
