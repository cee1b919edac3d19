package sriov

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// offers reports, of one scan, whether the whole card at pf is offered
// and how many devices of the card at other are.
func offers(s *xpunode.Scanner, pf, other string) (whole bool, others int) {
	for _, d := range s.Scan().Devices {
		switch pci := d.XPU.PCI; {
		case pci == nil:
		case pci.Address == pf:
			whole = true
		case pci.Address == other || pci.Parent == other:
			others++
		}
	}
	return whole, others
}

// Between the writes of a re-layout (0, then 4) card 0 is whole for at
// least udev's delay: the scans of the device plugin and the DRA driver
// (xpunode.Scanner with the lock's list of cards) never offer it whole,
// nor its VFs, while the apply runs; the card not laid out stays offered,
// and once the lock is released the new VFs are offered. A scan that
// ignores the list sees the card whole meanwhile: the window is real.
func TestApplyWithholdsTheCardsItLaysOut(t *testing.T) {
	testreq.FUSE(t, "the fake SR-IOV kernel")
	tr, k := withKernel(t, fakehost.P800SRIOV(), fakehost.SRIOVOptions{UdevDelay: 300 * time.Millisecond})
	const pf, other = "0000:03:00.0", "0000:83:00.0"
	c := config(tr)
	c.Settle = 10 * time.Second
	discoverFn := func() (*discover.Host, error) { return c.withDefaults().Discover() }
	withheld := xpunode.NewScanner(xpunode.ScannerConfig{
		Discover: discoverFn, NoSpecCheck: true,
		Withheld: func() ([]string, error) { return partition.LayingOut(tr.Root) },
	})
	blind := xpunode.NewScanner(xpunode.ScannerConfig{Discover: discoverFn, NoSpecCheck: true})
	whole, _ := offers(withheld, pf, other)
	require.False(t, whole, "card 0 has 2 VFs before the apply")

	var done atomic.Bool
	errc := make(chan error, 1)
	go func() {
		defer done.Store(true)
		_, err := apply(t, c, "0=4")
		errc <- err
	}()
	sawWhole, scans := false, 0
	for !done.Load() {
		w, _ := offers(blind, pf, other)
		sawWhole = sawWhole || w
		w, others := offers(withheld, pf, other)
		require.False(t, w, "a scan during the apply offered card 0 whole")
		require.Equal(t, 1, others, "the card not laid out stays offered")
		scans++
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, <-errc)
	require.Equal(t, []string{"0", "4"}, writes(k, pf, 0))
	require.True(t, sawWhole, "no scan of %d saw the window between the writes", scans)

	got, err := partition.LayingOut(tr.Root)
	require.NoError(t, err)
	require.Empty(t, got, "the lock released lists nothing")
	n := 0
	for _, d := range withheld.Scan().Devices {
		if d.XPU.PCI != nil && d.XPU.PCI.Parent == pf {
			n++
		}
	}
	require.Equal(t, 4, n, "the new VFs are offered once the apply is done")
}
