package sriov

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// A refused layout writes nothing: every sriov_numvfs keeps its content
// and its modification time.
func TestApplyRefusedChangesNothing(t *testing.T) {
	tr := build(t, fakehosttest.P800x8SRIOV())
	before := fakehosttest.Snapshot(t, tr)
	for _, layout := range []string{"all=4", "all=3", "9=2", "all=2,0=3"} {
		l, err := partition.ParseLayout(layout)
		require.NoError(t, err)
		_, err = Apply(context.Background(), config(tr), l)
		require.ErrorContains(t, err, "refused, nothing changed", layout)
	}
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))
}

// A card already at its count is not written: applying the current
// layout does nothing.
func TestApplyIdempotent(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	before := fakehosttest.Snapshot(t, tr)
	called := false
	c := config(tr)
	c.AfterApply = func(*discover.Host) error { called = true; return nil }
	for _, layout := range []string{"0=2,3=0", "0=2", "all=0,0=2"} {
		l, err := partition.ParseLayout(layout)
		require.NoError(t, err)
		rep, err := Apply(context.Background(), c, l)
		require.NoError(t, err)
		require.False(t, rep.Changed())
		for _, cr := range rep.Cards {
			require.Empty(t, cr.Writes)
		}
	}
	require.False(t, called)
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))
}

func TestApplyRefusedInUse(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	release := fakehosttest.HoldOpen(t, tr, 4242, 7, "python3", "/dev/xpu1")
	before := fakehosttest.Snapshot(t, tr)
	l, _ := partition.ParseLayout("0=4")
	_, err := Apply(context.Background(), config(tr), l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "card 0 (0000:03:00.0) is held by pid 4242 (python3) holding /dev/xpu1")
	// The writer is the DRA driver's too: it names no flag of the CLI.
	require.NotContains(t, err.Error(), "--wait")
	// A card not to change may be in use.
	l, _ = partition.ParseLayout("3=2")
	c := config(tr)
	c.DryRun = true
	rep, err := Apply(context.Background(), c, l)
	require.NoError(t, err)
	require.True(t, rep.Changed())
	require.Equal(t, "all=2", rep.After)
	require.Equal(t, before, fakehosttest.Snapshot(t, tr), "a dry run writes nothing")

	// --wait: the card is freed while Apply waits.
	c = config(tr)
	c.DryRun, c.Wait = true, 10*time.Second
	l, _ = partition.ParseLayout("0=4")
	go func() { time.Sleep(300 * time.Millisecond); release() }()
	start := time.Now()
	rep, err = Apply(context.Background(), c, l)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, 4, rep.Cards[0].Want)

	// --wait that ends first.
	defer fakehosttest.HoldOpen(t, tr, 4243, 3, "python3", "/dev/xpu0")()
	c.Wait = 1500 * time.Millisecond
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "after waiting 1.5s")
	require.ErrorContains(t, err, "pid 4243 (python3) holding /dev/xpu0")
}

func TestInUseByPods(t *testing.T) {
	tr := build(t, fakehost.R200SRIOV())
	srv := podresourcestest.NewServer(&podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
		podresourcestest.DevicePluginPod("ml", "infer", "app", "baidu.com/xpu-5gb", "3"),
		podresourcestest.DevicePluginPod("ml", "shared", "app", "baidu.com/xpu.shared", "1::2"),
		podresourcestest.DRAPod("team", "train", "main", "one-vf", names.DRADriver, "xpu-4"),
		podresourcestest.DevicePluginPod("x", "gpu", "app", "nvidia.com/gpu", "2"),
	}})
	c := config(tr)
	c.PodResourcesSocket = podresourcestest.Serve(t, srv)
	s, err := partition.Show(context.Background(), c.Config)
	require.NoError(t, err)
	require.Equal(t, []partition.User{
		{Node: "/dev/xpu3", Pod: "infer", Namespace: "ml", Container: "app"},
		{Node: "/dev/xpu4", Pod: "train", Namespace: "team", Container: "main", Claim: "one-vf"},
	}, s.Cards[0].InUse)
	require.Equal(t, []partition.User{{Node: "/dev/xpu1", Pod: "shared", Namespace: "ml", Container: "app"}}, s.Cards[1].InUse)
	require.Empty(t, s.Notes)

	l, _ := partition.ParseLayout("0=1")
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "pod ml/infer container app holding /dev/xpu3")
	require.ErrorContains(t, err, "pod team/train container main claim one-vf holding /dev/xpu4")

	// The pods are gone: the dry run goes through.
	srv.Set(nil)
	c.DryRun = true
	_, err = Apply(context.Background(), c, l)
	require.NoError(t, err)

	// No kubelet: a note, not an error.
	c.PodResourcesSocket = t.TempDir() + "/kubelet.sock"
	s, err = partition.Show(context.Background(), c.Config)
	require.NoError(t, err)
	require.Len(t, s.Notes, 1)
	require.Contains(t, s.Notes[0], "no kubelet PodResources socket at")

	// A kubelet that does not answer is an error: Apply must not guess.
	blocked := &podresourcestest.Server{Block: true}
	c.PodResourcesSocket = podresourcestest.Serve(t, blocked)
	c.PodResources.Timeout = 200 * time.Millisecond
	_, err = Apply(context.Background(), c, l)
	require.ErrorContains(t, err, "asking the kubelet which pods hold the cards")
}

// A kernel that never shows the result: the write times out, and the card
// is put back to its count (the write of 0 is undone by writing 2).
func TestApplyRollbackWhenTheKernelDoesNotFollow(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	p0, p3 := fakehosttest.NumVFsPath(t, tr, "0000:03:00.0"), fakehosttest.NumVFsPath(t, tr, "0000:83:00.0")
	require.NoError(t, os.Chmod(p0, 0o644))
	before3 := fakehosttest.Snapshot(t, tr)[p3]
	l, _ := partition.ParseLayout("0=4,3=2")
	called := false
	c := config(tr)
	c.AfterApply = func(*discover.Host) error { called = true; return nil }
	rep, err := Apply(context.Background(), c, l)
	require.Error(t, err)
	require.ErrorContains(t, err, "card 0 (0000:03:00.0): the kernel did not show 0 VFs within 300ms")
	require.ErrorContains(t, err, "put back to 2 VFs")
	require.Equal(t, []int{0, 2}, rep.Cards[0].Writes)
	require.True(t, rep.Cards[0].RolledBack)
	require.Equal(t, 2, rep.Cards[0].After)
	require.Empty(t, rep.Cards[1].Writes, "the cards after a failure are not touched")
	require.Equal(t, before3, fakehosttest.Snapshot(t, tr)[p3])
	data, err := os.ReadFile(p0)
	require.NoError(t, err)
	require.Equal(t, "2\n", string(data))
	require.False(t, called)
	require.Equal(t, "0=2,3=0", rep.After)
}

// A PF link leading out of the root is resolved inside it, and a
// sriov_numvfs that is a symlink is never followed: nothing outside the
// root is written.
func TestApplyRefusesHostileSysfs(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(outside+"/sriov_numvfs", []byte("0\n"), 0o644))
	link := tr.Path("/sys/bus/pci/devices/0000:83:00.0")
	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink(outside, link))
	l, _ := partition.ParseLayout("3=2")
	_, err := Apply(context.Background(), config(tr), l)
	require.Error(t, err)
	data, _ := os.ReadFile(outside + "/sriov_numvfs")
	require.Equal(t, "0\n", string(data))

	// The attribute itself a link to a file outside.
	tr = build(t, fakehosttest.P800SRIOVBoth())
	p3 := fakehosttest.NumVFsPath(t, tr, "0000:83:00.0")
	require.NoError(t, os.Remove(p3))
	require.NoError(t, os.Symlink(outside+"/sriov_numvfs", p3))
	_, err = Apply(context.Background(), config(tr), l)
	require.Error(t, err)
	data, _ = os.ReadFile(outside + "/sriov_numvfs")
	require.Equal(t, "0\n", string(data))
}

// Applies take turns: while another holds the node's lock, Apply waits for
// it, at most Settle (or Wait), and then refuses with nothing written.
func TestApplyLock(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	before := fakehosttest.Snapshot(t, tr)
	c := config(tr)
	lock, err := LockLayout(context.Background(), tr.Root, time.Second)
	require.NoError(t, err)
	l, _ := partition.ParseLayout("3=2")
	start := time.Now()
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrLocked)
	require.GreaterOrEqual(t, time.Since(start), c.Settle)
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))

	// A dry run does not wait for it.
	c.DryRun = true
	_, err = Apply(context.Background(), c, l)
	require.NoError(t, err)

	// Released meanwhile: the apply goes on.
	require.NoError(t, os.Chmod(fakehosttest.NumVFsPath(t, tr, "0000:83:00.0"), 0o644))
	c.DryRun, c.Wait = false, 5*time.Second
	go func() { time.Sleep(300 * time.Millisecond); lock.Unlock() }()
	c.Settle = 100 * time.Millisecond
	var reached bool
	c.hooks = &applyHooks{beforeCard: func(string) { reached = true }}
	start = time.Now()
	_, err = Apply(context.Background(), c, l)
	require.NotErrorIs(t, err, ErrLocked)
	require.True(t, reached, "past the lock once it was released")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
}

// The attribute checks (O_NONBLOCK, one link, a regular file) let the
// fake SR-IOV kernel's sriov_numvfs through: apply lays a card out on it.
func TestApplyOnTheFakeSRIOVKernel(t *testing.T) {
	testreq.FUSE(t, "the fake SR-IOV kernel")
	tr := fakehosttest.Build(t, fakehost.P800SRIOV())
	k := fakehosttest.StartSRIOV(t, tr, fakehost.SRIOVOptions{UdevDelay: 20 * time.Millisecond})
	c := config(tr)
	c.Settle = 10 * time.Second
	l, _ := partition.ParseLayout("3=2")
	rep, err := Apply(context.Background(), c, l)
	require.NoError(t, err)
	require.Equal(t, []int{2}, rep.Cards[1].Writes)
	require.Equal(t, 2, k.NumVFs("0000:83:00.0"))
}

// A PF without a node of its own is laid out by its address.
func TestApplyCardWithoutPFNode(t *testing.T) {
	h := fakehost.R200SRIOV()
	h.Devices[0].NoNode = true
	tr := build(t, h)
	c2 := config(tr)
	c2.DryRun = true
	l, _ := partition.ParseLayout("0000:3b:00.0=2")
	rep, err := Apply(context.Background(), c2, l)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Cards[1].Want)
	_, err = Apply(context.Background(), c2, partition.Layout{{Selector: "0", VFs: 2}})
	require.ErrorContains(t, err, "0=2: no such card on this node (cards: 1 0000:5e:00.0, 0000:3b:00.0)")
}

// The DRA driver's dynamic mode names its devices by card and slot: the
// whole card xpu-1 is the card at place 1 in PCI address order (its PF is
// /dev/xpu3 here), not /dev/xpu1 (a VF of card 0), and the slot xpu-0-h1
// is card 0's second VF, /dev/xpu2. Read so, the in-use check neither
// refuses card 0 for the whole-card claim nor misses its holders; the
// same names read as static ones are /dev/xpuN.
func TestInUseByDynamicClaims(t *testing.T) {
	tr := build(t, fakehost.P800SRIOV())
	srv := podresourcestest.NewServer(&podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
		podresourcestest.DRAPod("team", "whole", "main", "card", names.DRADriver, "xpu-1"),
		podresourcestest.DRAPod("team", "half", "main", "vf", names.DRADriver, "xpu-0-h1"),
	}})
	c := config(tr)
	c.PodResourcesSocket = podresourcestest.Serve(t, srv)
	c.DRADynamicNames = true
	s, err := partition.Show(context.Background(), c.Config)
	require.NoError(t, err)
	require.Equal(t, "0000:03:00.0", s.Cards[0].Address)
	require.Equal(t, []partition.User{{Node: "/dev/xpu2", Pod: "half", Namespace: "team", Container: "main", Claim: "vf"}}, s.Cards[0].InUse)
	require.Equal(t, []partition.User{{Node: "/dev/xpu3", Pod: "whole", Namespace: "team", Container: "main", Claim: "card"}}, s.Cards[1].InUse)

	// Card 1 is held: a layout of it is refused, naming the pod.
	l, _ := partition.ParseLayout("0000:83:00.0=2")
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "pod team/whole container main claim card holding /dev/xpu3")

	// Static names: xpu-1 is /dev/xpu1, and xpu-0-h1 no node.
	c.DRADynamicNames = false
	s, err = partition.Show(context.Background(), c.Config)
	require.NoError(t, err)
	require.Equal(t, []partition.User{{Node: "/dev/xpu1", Pod: "whole", Namespace: "team", Container: "main", Claim: "card"}}, s.Cards[0].InUse)
	require.Empty(t, s.Cards[1].InUse)
}
