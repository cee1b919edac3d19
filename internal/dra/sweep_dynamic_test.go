package dra

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// In dynamic mode a swept claim frees its slot as Unprepare does, and the
// idle policy applies: with IdleWhole its card goes back to whole.
func TestSweepDynamicIdleWhole(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run("IdleWhole="+strconv.FormatBool(whole), func(t *testing.T) {
			clk := &clock{now: testClock()}
			f := newDynFixture(t, fakehost.P800SRIOV())
			d := f.driver(t, func(c *Config) {
				c.IdleWhole, c.KubeClient, c.Clock, c.SweepGrace = whole, fake.NewClientset(), clk.Now, time.Minute
			})
			_, err := prepareOne(t, d, claim("a", "xpu-1-h0"))
			require.NoError(t, err)
			require.Equal(t, 2, f.k.NumVFs(card1))
			_, err = d.Sweep(context.Background())
			require.NoError(t, err)
			clk.add(time.Minute)
			_, err = d.Sweep(context.Background())
			require.NoError(t, err)
			require.Empty(t, d.Prepared())
			want := 2
			if whole {
				want = 0
			}
			require.Equal(t, want, f.k.NumVFs(card1))
		})
	}
}

// At start, after the re-layouts are finished and the stale claims found,
// the cards' layouts and the records agree: a card with VFs that no claim
// holds keeps them by default and goes back to whole with IdleWhole; a
// card laid out again under a recorded claim is named in the log and not
// touched.
func TestReconcileAtStart(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run("IdleWhole="+strconv.FormatBool(whole), func(t *testing.T) {
			f := newDynFixture(t, fakehost.P800SRIOV())
			// Card 1 in halves, one held by a claim; then laid out in
			// quarters behind the driver's back.
			_, err := prepareOne(t, f.d, claim("q", "xpu-1-h0"))
			require.NoError(t, err)
			writeNumVFs(t, f, card1, 0)
			writeNumVFs(t, f, card1, 4)
			require.Equal(t, 2, f.k.NumVFs(card0), "card 0 has 2 VFs and no claim")

			d := f.driver(t, func(c *Config) { c.IdleWhole = whole })
			ctx, cancel := context.WithCancel(context.Background())
			rec := newRecorder()
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx, rec) }()
			<-rec.notify
			cancel()
			require.NoError(t, <-done)

			want := 2
			if whole {
				want = 0
			}
			require.Equal(t, want, f.k.NumVFs(card0))
			require.Equal(t, 4, f.k.NumVFs(card1), "a card a claim is recorded on is not touched")
			require.True(t, f.log.Has("card "+card1+" has 4 VFs, but claim default/q is recorded with its device xpu-1-h0 (2 VFs)"), f.log.String())
		})
	}
}

// The writer the command configures rewrites the node spec with
// xpunode.RefreshSpecDevices after a re-layout: a spec that named the
// cards by index only gets the new VFs' PCI-address names, which Prepare
// answers with.
func TestDynamicPrepareRefreshesNodeSpec(t *testing.T) {
	f := newDynFixture(t, fakehost.P800SRIOV())
	host, err := discover.Discover(f.tree.DiscoverOptions()...)
	require.NoError(t, err)
	spec, _, err := cdispec.New(host, cdispec.Settings{NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex}, NoHooks: true, HostRoot: f.tree.Root})
	require.NoError(t, err)
	require.NoError(t, cdispec.WriteFile(filepath.Join(f.specDir, "baidu.com-xpu.yaml"), spec, cdispec.FormatYAML))
	w := f.writer
	w.AfterApply = func(h *discover.Host) error {
		_, err := xpunode.RefreshSpecDevices(cdispec.DefaultKind, []string{f.specDir}, f.tree.Root, h)
		return err
	}
	d := f.driver(t, func(c *Config) { c.Layout = &w })
	ids, err := prepareOne(t, d, claim("c", "xpu-1-q3"))
	require.NoError(t, err)
	vfs, err := sriov.VirtFns(f.tree.Root, card1)
	require.NoError(t, err)
	require.Equal(t, []string{"baidu.com/xpu=" + vfs[3]}, ids)
}
