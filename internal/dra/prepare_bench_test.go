package dra

import (
	"fmt"
	"testing"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/benchstat"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
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
