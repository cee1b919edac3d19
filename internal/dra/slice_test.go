package dra

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
)

// The slice of every fake host shape, as print-slice prints it, against
// testdata/<shape>.yaml (review the diff after go test -update).
func TestSliceGolden(t *testing.T) {
	forEachShape(t, func(t *testing.T, shape string, f *fixture) {
		got, err := yaml.Marshal(f.d.Slices()[0])
		require.NoError(t, err)
		testutil.Golden(t, shape+".yaml", got)
		// What the API server would get decodes strictly.
		var back resourceapi.ResourceSlice
		require.NoError(t, yaml.UnmarshalStrict(got, &back))
	})
}

func TestSliceFacts(t *testing.T) {
	t.Run("r200-sriov: the PF with VFs enabled is not offered, its VFs are", func(t *testing.T) {
		f := newFixture(t, fakehost.R200SRIOV())
		f.d.Refresh()
		s := f.d.Slices()[0]
		names := []string{}
		for _, d := range s.Spec.Devices {
			names = append(names, d.Name)
		}
		// The VFs (5 GiB) before the whole R200, whose memory no source
		// tells (best fit first, order.go).
		require.Equal(t, []string{"xpu-2", "xpu-3", "xpu-4", "xpu-1"}, names)
		vf := s.Spec.Devices[0]
		require.Equal(t, "vf", *vf.Attributes[AttrSRIOVRole].StringValue)
		require.Equal(t, "0000:3b:00.0", *vf.Attributes[AttrParentBusID].StringValue)
		require.Equal(t, "0000:3b:00.1", *vf.Attributes["resource.kubernetes.io/pciBusID"].StringValue)
		require.Equal(t, int64(0), *vf.Attributes["resource.kubernetes.io/numaNode"].IntValue)
		mem := vf.Capacity[CapacityMemory].Value
		require.Equal(t, int64(5<<30), mem.Value())
	})
	t.Run("p800x8: pcieRoot from the fake sysfs, not the real one", func(t *testing.T) {
		f := newFixture(t, fakehost.P800x8())
		f.d.Refresh()
		s := f.d.Slices()[0]
		require.Len(t, s.Spec.Devices, 8)
		require.Equal(t, "pci0000:00", *s.Spec.Devices[0].Attributes["resource.kubernetes.io/pcieRoot"].StringValue)
		require.Equal(t, "pci0000:80", *s.Spec.Devices[7].Attributes["resource.kubernetes.io/pcieRoot"].StringValue)
		require.Equal(t, "5.0.21+21", *s.Spec.Devices[0].Attributes[AttrDriverVersion].VersionValue)
		require.Equal(t, "5.0.21.21", *s.Spec.Devices[0].Attributes[AttrDriverVersion+"Full"].StringValue)
		require.Equal(t, "Kunlun3", *s.Spec.Devices[0].Attributes[AttrFamily].StringValue)
	})
	t.Run("directories linked out of the dev root: nothing of what they lead to", func(t *testing.T) {
		for _, h := range []fakehost.Host{fakehost.R200SRIOV(), fakehost.P800x8(), fakehost.P800XRE5()} {
			f := newFixture(t, h)
			fakehosttest.LinkDirsOut(t, f.tree)
			f.d.Refresh()
			got, err := yaml.Marshal(f.d.Slices()[0])
			require.NoError(t, err)
			require.NotContains(t, string(got), fakehosttest.OutsideSecret, h.Shape)
			require.NotContains(t, string(got), "4242", h.Shape)
		}
	})
	t.Run("degraded: the XPU in ERROR is tainted with its state", func(t *testing.T) {
		f := newFixture(t, fakehost.Degraded())
		f.d.Refresh()
		s := f.d.Slices()[0]
		require.Len(t, s.Spec.Devices, 3)
		// xpu-1 tells no memory: it comes last (order.go).
		x3 := s.Spec.Devices[1]
		require.Equal(t, "xpu-3", x3.Name)
		require.Equal(t, []resourceapi.DeviceTaint{{Key: "xpu.baidu.com/unhealthy", Value: "ERROR", Effect: resourceapi.DeviceTaintEffectNoSchedule, TimeAdded: x3.Taints[0].TimeAdded}}, x3.Taints)
		require.Empty(t, s.Spec.Devices[0].Taints)
	})
}

func TestSemVer(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"4.33.0", "4.33.0"},
		{"4.33", "4.33.0"},
		{"5.0.21.47", "5.0.21+47"},
		{"5.0.21.16", "5.0.21+16"},
		{"0001.0000.0020", "1.0.20"},
		{"v4.0.11", "4.0.11"},
		{"1.2.3.4.5", "1.2.3+4.5"},
	} {
		got, ok := SemVer(tc.in)
		require.True(t, ok, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"", "4", "four.33", "4.33.0-rc1", "4..0"} {
		_, ok := SemVer(bad)
		require.False(t, ok, bad)
	}
}

// recorder is a Publisher that keeps what it was given.
type recorder struct {
	mu        sync.Mutex
	published []resourceslice.DriverResources
	notify    chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 100)} }

func (r *recorder) PublishResources(_ context.Context, res resourceslice.DriverResources) error {
	r.mu.Lock()
	r.published = append(r.published, res)
	r.mu.Unlock()
	r.notify <- struct{}{}
	return nil
}

func (r *recorder) last() []resourceapi.Device {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.published[len(r.published)-1]
	return p.Pools["node-1"].Slices[0].Devices
}

func (r *recorder) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.notify:
	case <-time.After(5 * time.Second):
		t.Fatal("nothing published in 5s")
	}
}

// Run keeps the slice true: a device that goes into ERROR is tainted, one
// that recovers is not, and a spec that disappears taints every device.
func TestRunFollowsTheHost(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := newRecorder()
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx, pub) }()
	pub.wait(t)
	require.Len(t, pub.last(), 8)
	for _, d := range pub.last() {
		require.Empty(t, d.Taints, d.Name)
	}

	f.setState(t, 5, "ERROR")
	pub.wait(t)
	got := pub.last()
	require.Len(t, got[5].Taints, 1)
	require.Equal(t, "ERROR", got[5].Taints[0].Value)
	require.Empty(t, got[4].Taints)

	f.setState(t, 5, "RUNNING")
	pub.wait(t)
	require.Empty(t, pub.last()[5].Taints)

	require.NoError(t, os.Remove(filepath.Join(f.specDir, "baidu.com-xpu.yaml")))
	pub.wait(t)
	for _, d := range pub.last() {
		require.Equal(t, "NoCDISpec", d.Taints[0].Value, d.Name)
	}
	require.True(t, f.log.Has("no CDI spec of kind baidu.com/xpu in "+f.specDir+" names XPU(s) 0,1,2,3,4,5,6,7"), f.log.String())

	cancel()
	require.NoError(t, <-done)
	pub.mu.Lock()
	require.Len(t, pub.published, 4, "published only on changes")
	pub.mu.Unlock()
}

// A node without XPU publishes one empty slice and keeps running.
func TestNodeWithoutXPU(t *testing.T) {
	log := &logtest.Recorder{}
	root := t.TempDir()
	d, err := New(Config{NodeName: "node-1", Discover: func() (*xpuHost, error) { return discoverRoot(root) }, SpecDirs: []string{t.TempDir()}, Log: log, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	pub := newRecorder()
	require.NoError(t, d.Run(ctx, pub))
	require.Len(t, pub.published, 1)
	require.Empty(t, pub.last())
	require.Equal(t, 1, log.Count("publishing an empty ResourceSlice"), log.String())
	require.Empty(t, d.Devices())
}

// Devices that appear are published.
func TestDevicesAppear(t *testing.T) {
	h := fakehost.P800x8()
	tree := fakehosttest.Build(t, h)
	empty := t.TempDir()
	specDir := t.TempDir()
	fakehosttest.WriteSpec(t, tree, specDir)
	var mu sync.Mutex
	root := empty
	d, err := New(Config{NodeName: "node-1", SpecDirs: []string{specDir}, Discover: func() (*xpuHost, error) {
		mu.Lock()
		defer mu.Unlock()
		if root == empty {
			return discoverRoot(empty)
		}
		return discoverTree(tree)()
	}})
	require.NoError(t, err)
	require.True(t, d.Refresh())
	require.Empty(t, d.Slices()[0].Spec.Devices)
	mu.Lock()
	root = tree.Root
	mu.Unlock()
	require.True(t, d.Refresh())
	require.Len(t, d.Slices()[0].Spec.Devices, 8)
	require.False(t, d.Refresh(), "no change, nothing to publish")
	require.Equal(t, xpunode.Healthy, d.Devices()[0].Health)
}
