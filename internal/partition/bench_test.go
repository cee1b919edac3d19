package partition

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
)

// p800x8Quarters is an 8-card P800 box (driver 5.x, nodes through
// /sys/dev/char) with the largest layout the 32-handle budget allows: six
// cards in 4 VFs of 24576 MiB (24 VFs), two whole.
func p800x8Quarters() fakehost.Host {
	h := fakehost.P800Sysfs()
	pfs := h.Devices
	h.Devices = nil
	next := len(pfs)
	for i, pf := range pfs {
		pf.TotalVFs = 4
		h.Devices = append(h.Devices, pf)
		if i >= 6 {
			continue
		}
		for k := range 4 {
			vf := pf
			vf.Index, vf.Minor = next, uint32(next)
			vf.BDF = fmt.Sprintf("%s%d", pf.BDF[:len(pf.BDF)-1], 1+k)
			vf.Function, vf.PhysFn, vf.TotalVFs, vf.MemoryMiB = fakehost.FunctionVF, pf.BDF, 0, 24576
			h.Devices = append(h.Devices, vf)
			next++
		}
	}
	return h
}

// BenchmarkShow8Cards24VFs is `partition show` on 8 cards with 24 VFs:
// discovery, the cards, and the scan of /proc for their users (200 fake
// processes of 10 descriptors each, one of which holds a VF of card 1).
func BenchmarkShow8Cards24VFs(b *testing.B) {
	tr := fakehosttest.BuildOnTmpfs(b, p800x8Quarters())
	for pid := 1000; pid < 1200; pid++ {
		for fd := range 10 {
			node := "/proc/devices"
			if pid == 1100 && fd == 9 {
				node = "/dev/xpu12"
			}
			fakehosttest.HoldOpen(b, tr, pid, fd, "python3", node)
		}
	}
	c := config(tr)
	b.ReportAllocs()
	for b.Loop() {
		s, err := Show(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		vfs := 0
		for _, card := range s.Cards {
			vfs += len(card.VFs)
		}
		if len(s.Cards) != 8 || vfs != 24 || s.HandlesUsed != 32 || len(s.Cards[1].InUse) != 1 {
			b.Fatalf("%d cards, %d VFs, %d handles, card 1 users %v", len(s.Cards), vfs, s.HandlesUsed, s.Cards[1].InUse)
		}
	}
}

// BenchmarkScanManyDescriptors is the in-use scan (`partition show`) of a
// node whose processes hold many descriptors and no card: 100k sockets
// and pipes and 100k dups of a plain file (as a proxy or a database has,
// or a user who wants to stop every layout), in real processes of
// RLIMIT_NOFILE's hard limit each (one process where the limit allows).
// A process holding a card comes last. It reports the descriptors looked
// at per second.
func BenchmarkScanManyDescriptors(b *testing.B) {
	const total = 200_000
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	per := int(min(lim.Max-64, total))
	tr := fakehosttest.BuildOnTmpfs(b, p800x8Quarters())
	n := 0
	for n < total {
		count := min(per, total-n)
		startHolder(b, tr, holdMany, "/proc/devices", holderCount+"="+strconv.Itoa(count))
		n += count
	}
	fakehosttest.HoldOpen(b, tr, 1<<22, 3, "python3", "/dev/xpu12")
	c := config(tr)
	b.ReportAllocs()
	for b.Loop() {
		s, err := Show(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Notes) > 0 || len(s.Cards[1].InUse) != 1 {
			b.Fatalf("notes %v, card 1 users %v", s.Notes, s.Cards[1].InUse)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "descriptors/s")
	b.ReportMetric(float64(per), "descriptors/process")
}
