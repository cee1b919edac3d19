package dra

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/benchstat"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// BenchmarkPrepare measures NodePrepareResources as the kubelet calls it
// (gRPC to the helper, the claim read from a fake API server, the host
// and the specs read again, the claim record written and synced) for a
// claim of 1 and of 8 XPUs on an 8-XPU P800 host. Each iteration prepares
// a new claim; unpreparing it is not timed. It reports the median and the
// 99th percentile besides the mean.
func BenchmarkPrepare(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("xpus=%d", n), func(b *testing.B) {
			f := newFixture(b, fakehost.P800x8())
			k := startKubelet(b, f.d)
			devs := make([]string, n)
			for i := range devs {
				devs[i] = names.DRADevice(i)
			}
			durations := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c := claim(fmt.Sprintf("bench-%d", i), devs...)
				k.create(b, c)
				b.StartTimer()
				start := time.Now()
				r := k.prepare(b, c)
				durations = append(durations, time.Since(start))
				b.StopTimer()
				if r.GetError() != "" {
					b.Fatalf("prepare: %s", r.GetError())
				}
				if e := k.unprepare(b, c); e != "" {
					b.Fatalf("unprepare: %s", e)
				}
				b.StartTimer()
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(benchstat.Median(durations)), "median-ms")
			b.ReportMetric(ms(benchstat.Quantile(durations, 0.99)), "p99-ms")
		})
	}
}

// BenchmarkDynamicPrepare measures PrepareResourceClaims in dynamic mode
// on an 8-card P800 host built with every card cut in halves already (the
// path of a card that has the claim's layout: no write, so no fake kernel
// is needed): each iteration prepares a claim for one half of card i%8
// (the host and the specs read again, the VF found by its virtfn link, the
// record written and synced); unpreparing it is not timed. It reports the
// median and the 99th percentile besides the mean.
func BenchmarkDynamicPrepare(b *testing.B) {
	h, err := fakehost.P800x8SRIOV().WithVFs(2)
	if err != nil {
		b.Fatal(err)
	}
	f := newFixture(b, h, dynamicMode)
	spec, _, err := cdispec.New(mustDiscover(b, f.tree), cdispec.Settings{NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex, cdispec.NameByBDF}, NoHooks: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := cdispec.WriteFile(filepath.Join(f.specDir, "baidu.com-xpu.yaml"), spec, cdispec.FormatYAML); err != nil {
		b.Fatal(err)
	}
	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := claim(fmt.Sprintf("bench-%d", i), SlotName(i%8, 2, i%2))
		start := time.Now()
		if _, err := prepareOne(b, f.d, c); err != nil {
			b.Fatalf("prepare: %v", err)
		}
		durations = append(durations, time.Since(start))
		b.StopTimer()
		unprepareOne(b, f.d, c)
		b.StartTimer()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(benchstat.Median(durations)), "median-ms")
	b.ReportMetric(ms(benchstat.Quantile(durations, 0.99)), "p99-ms")
}

// BenchmarkDynamicRelayout measures a Prepare that lays card 0 of an
// 8-card P800 host out again (halves, then quarters, and so on: 0, then
// the count) on the fake SR-IOV kernel, with udev at once. It reports the
// median of the whole Prepare and of the part in the SR-IOV writer
// (sriov.Apply: its plan, its check of who holds the card, the writes and
// its waits for the kernel and udev to show them); the rest is the
// driver's own (scans, records, the VF's lookup, the spec check).
func BenchmarkDynamicRelayout(b *testing.B) {
	f := newDynFixture(b, fakehost.P800x8SRIOV())
	var inWriter []time.Duration
	d := f.driver(b, func(c *Config) {
		apply := applyLayout(f.writer)
		c.relayout = func(ctx context.Context, addr string, n int) error {
			start := time.Now()
			err := apply(ctx, addr, n)
			inWriter = append(inWriter, time.Since(start))
			return err
		}
	})
	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := claim(fmt.Sprintf("bench-%d", i), SlotName(0, []int{2, 4}[i%2], 0))
		start := time.Now()
		if _, err := prepareOne(b, d, c); err != nil {
			b.Fatalf("prepare: %v", err)
		}
		durations = append(durations, time.Since(start))
		b.StopTimer()
		unprepareOne(b, d, c)
		b.StartTimer()
	}
	b.StopTimer()
	if len(inWriter) != b.N {
		b.Fatalf("%d re-layouts for %d claims", len(inWriter), b.N)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(benchstat.Median(durations)), "median-ms")
	b.ReportMetric(ms(benchstat.Median(inWriter)), "writer-median-ms")
}

func mustDiscover(b *testing.B, tr *fakehost.Tree) *discover.Host {
	b.Helper()
	h, err := discover.Discover(tr.DiscoverOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	return h
}
