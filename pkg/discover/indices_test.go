package discover_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// recordingStater answers for the tree's nodes and records which were
// stat'ed.
type recordingStater struct {
	inner discover.NodeStater
	mu    sync.Mutex
	paths []string
}

var _ discover.NodeStater = (*recordingStater)(nil)

func (r *recordingStater) StatNode(hostPath string) (discover.NodeInfo, error) {
	r.mu.Lock()
	r.paths = append(r.paths, hostPath)
	r.mu.Unlock()
	return r.inner.StatNode(hostPath)
}

// TestWithIndicesMatchesFullDiscovery discovers every shape of fake host
// for selections of its devices and checks that each selected device, and
// everything host-wide, is what a full discovery finds; that only the
// selected nodes and the control node are stat'ed; and that nothing else
// is in the result.
func TestWithIndicesMatchesFullDiscovery(t *testing.T) {
	for _, tc := range []struct {
		description string
		host        fakehost.Host
		selections  [][]int
	}{
		{description: "8 x P800", host: fakehost.P800x8(), selections: [][]int{{0}, {7}, {3, 1}, {5, 5}, {0, 1, 2, 3, 4, 5, 6, 7}}},
		{
			description: "R200 with SR-IOV: PF alone, VF alone (parent model from sysfs), PF with its VF",
			host:        fakehost.R200SRIOV(),
			selections:  [][]int{{0}, {1}, {2}, {4, 3}, {0, 2}, {1, 2, 3, 4}},
		},
		{description: "K200: power domains sharing a PCI function", host: fakehost.K200(), selections: [][]int{{0}, {1}, {0, 1}}},
		{
			description: "degraded: unknown ID, no procfs, no sysfs, a gap",
			host:        fakehost.Degraded(),
			selections:  [][]int{{0}, {1}, {3}, {2, 3}, {0, 1, 3}},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := fakehosttest.Build(t, tc.host, fakehost.WithoutMknod())
			full, err := discover.Discover(tree.DiscoverOptions()...)
			require.NoError(t, err)

			for _, sel := range tc.selections {
				rec := &recordingStater{inner: tree.NodeStater()}
				opts := append(tree.DiscoverOptions(), discover.WithNodeStater(rec), discover.WithIndices(sel...))
				h, err := discover.Discover(opts...)
				require.NoError(t, err, "indices %v", sel)

				var want []*discover.Device
				var wantStat []string
				for _, i := range slices.Compact(slices.Sorted(slices.Values(sel))) {
					wantStat = append(wantStat, filepath.Join(tree.Root, "dev", "xpu"+strconv.Itoa(i)))
					if d := full.Device(i); d != nil {
						want = append(want, d)
					}
				}
				wantStat = append(wantStat, filepath.Join(tree.Root, "dev", "xpuctrl"))
				require.Equal(t, want, h.Devices, "indices %v: the devices differ from a full discovery's", sel)
				for _, d := range want {
					require.Equal(t, d, h.Device(d.Index))
				}
				require.Equal(t, wantStat, rec.paths, "indices %v: nodes stat'ed", sel)
				require.Equal(t, full.Control, h.Control)
				require.Equal(t, full.DriverVersion, h.DriverVersion)
				require.Equal(t, full.Libraries, h.Libraries)
				require.Equal(t, full.Tools, h.Tools)
				require.Equal(t, full.Warnings, h.Warnings)
				require.Equal(t, full.DevRoot, h.DevRoot)
				require.Equal(t, full.DriverRoot, h.DriverRoot)
			}
		})
	}
}

// TestWithIndicesSRIOV spells out the SR-IOV facts a narrow discovery must
// keep: the PF with VFs enabled is found but not offered, a VF alone knows
// its parent and the parent's model.
func TestWithIndicesSRIOV(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.R200SRIOV(), fakehost.WithoutMknod())

	h, err := discover.Discover(append(tree.DiscoverOptions(), discover.WithIndices(0))...)
	require.NoError(t, err)
	require.Len(t, h.Devices, 1)
	pf := h.Device(0)
	require.Equal(t, discover.FunctionPF, pf.PCI.Function)
	require.Equal(t, 3, pf.PCI.NumVFs)
	require.Equal(t, 3, pf.PCI.TotalVFs)
	require.False(t, pf.Compute, "a PF with VFs enabled is not offered")
	require.Empty(t, h.ComputeDevices())
	require.ErrorIs(t, h.CheckUsable(), discover.ErrNoComputeDevice)

	h, err = discover.Discover(append(tree.DiscoverOptions(), discover.WithIndices(3))...)
	require.NoError(t, err)
	vf := h.Device(3)
	require.NotNil(t, vf)
	require.Equal(t, discover.FunctionVF, vf.PCI.Function)
	require.Equal(t, "0000:3b:00.0", vf.PCI.Parent)
	require.Equal(t, "R200 VF", vf.Model)
	require.True(t, vf.Compute)
	require.NoError(t, h.CheckUsable())
}

// TestWithIndicesNothingFound: a selection without any node fails as a host
// without nodes does; indices no node name can carry are ignored.
func TestWithIndicesNothingFound(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.Degraded(), fakehost.WithoutMknod())
	for _, tc := range []struct {
		description string
		indices     []int
		wantErr     string
	}{
		{description: "the gap of the degraded host", indices: []int{2}, wantErr: "no " + filepath.Join(tree.Root, "dev") + "/xpuN device node of index 2"},
		{description: "beyond the last device", indices: []int{4, 9}, wantErr: "of index 4,9"},
		{description: "negative and too large", indices: []int{-1, 1<<20 + 1}, wantErr: "of index -1,1048577"},
		{description: "no index at all", indices: nil, wantErr: "(none asked)"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, err := discover.Discover(append(tree.DiscoverOptions(), discover.WithIndices(tc.indices...))...)
			require.ErrorIs(t, err, discover.ErrNoDevices)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}

	t.Run("no /dev at all", func(t *testing.T) {
		root := t.TempDir()
		_, err := discover.Discover(discover.WithDevRoot(root), discover.WithDriverRoot(root), discover.WithIndices(0))
		require.ErrorIs(t, err, discover.ErrNoDevices)
		require.ErrorContains(t, err, filepath.Join(root, "dev")+" does not exist")
	})

	t.Run("a selected node that is missing while others exist", func(t *testing.T) {
		h, err := discover.Discover(append(tree.DiscoverOptions(), discover.WithIndices(1, 2))...)
		require.NoError(t, err)
		require.Len(t, h.Devices, 1)
		require.NotNil(t, h.Device(1))
		require.Nil(t, h.Device(2))
	})
}
