package dra

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/xpu-cdi/xpu-cdi/internal/benchstat"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
)

// Churn shape (docs/security.md, "Churn and restarts leave no stale
// hold"): 500 claims of one XPU each, created,
// prepared, unprepared and deleted 20 at a time on a 24-XPU host, through
// the kubelet plugin gRPC API of the real helper library. Each round moves
// the claims to other XPUs, so every XPU passes from claim to claim. In
// round driverRestartRound the driver restarts (a new process on the same
// state directory) between Prepare and Unprepare; in round
// kubeletRestartRound the kubelet restarts: it prepares its claims again
// from its checkpoint, as a restarted kubelet does, and unprepares the
// one deleted while it was down.
const (
	churnClaims         = 500
	churnBatch          = 20
	churnXPUs           = 24
	driverRestartRound  = 8
	kubeletRestartRound = 16
)

// churn runs the churn and returns the duration of every Prepare call
// (each waits for the calls before it: the helper serializes them) and,
// per batch of concurrent calls, the batch's time divided by its size (the
// time one Prepare takes the driver).
func churn(t testing.TB) (durations, perClaim []time.Duration) {
	f := newFixture(t, fakehost.Scaled(churnXPUs, 4))
	k := startKubelet(t, f.d)
	var mu sync.Mutex
	parallel := func(claims []*resourceapi.ResourceClaim, call func(c *resourceapi.ResourceClaim)) {
		var wg sync.WaitGroup
		for _, c := range claims {
			wg.Go(func() { call(c) })
		}
		wg.Wait()
	}
	prepareAll := func(claims []*resourceapi.ResourceClaim) {
		batch := time.Now()
		defer func() { perClaim = append(perClaim, time.Since(batch)/time.Duration(len(claims))) }()
		parallel(claims, func(c *resourceapi.ResourceClaim) {
			start := time.Now()
			r := k.prepare(t, c)
			d := time.Since(start)
			mu.Lock()
			durations = append(durations, d)
			mu.Unlock()
			require.Empty(t, r.GetError(), "claim %s", c.Name)
			require.Equal(t, []string{"baidu.com/xpu=" + c.Status.Allocation.Devices.Results[0].Device[len("xpu-"):]}, cdiIDs(r))
		})
	}
	for round := range churnClaims / churnBatch {
		claims := make([]*resourceapi.ResourceClaim, churnBatch)
		for i := range claims {
			claims[i] = claim(fmt.Sprintf("churn-%d-%d", round, i), names.DRADevice((round*7+i)%churnXPUs))
			k.create(t, claims[i])
		}
		prepareAll(claims)
		require.Len(t, f.d.Prepared(), churnBatch, "round %d", round)

		switch round {
		case driverRestartRound:
			objs := make([]runtime.Object, len(claims))
			for i, c := range claims {
				objs[i] = c
			}
			f.d = f.driver(t)
			require.Len(t, f.d.Prepared(), churnBatch, "the restarted driver reads the records")
			k = startKubelet(t, f.d, objs...)
		case kubeletRestartRound:
			gone := claims[0]
			claims = claims[1:]
			require.NoError(t, k.client.ResourceV1().ResourceClaims(gone.Namespace).Delete(context.Background(), gone.Name, metav1.DeleteOptions{}))
			prepareAll(claims)
			require.Empty(t, k.unprepare(t, gone))
		}

		parallel(claims, func(c *resourceapi.ResourceClaim) {
			require.Empty(t, k.unprepare(t, c), "claim %s", c.Name)
			require.NoError(t, k.client.ResourceV1().ResourceClaims(c.Namespace).Delete(context.Background(), c.Name, metav1.DeleteOptions{}))
		})
		require.Empty(t, f.d.Prepared(), "round %d: no claim is left prepared", round)
		require.Empty(t, f.records(t), "round %d: no record leaks", round)
	}
	require.Zero(t, f.log.Count("the device is prepared for another claim"), "no XPU refused for a claim that is gone")
	return durations, perClaim
}

func TestChurn(t *testing.T) {
	durations, _ := churn(t)
	require.GreaterOrEqual(t, len(durations), churnClaims)
}

// BenchmarkChurn reports the median and 99th percentile of Prepare during
// the churn, as the kubelet sees them (20 calls at once, serialized by the
// helper) and per claim (a batch's time over its size). Run it with
// -benchtime=1x: one churn per iteration.
func BenchmarkChurn(b *testing.B) {
	var all, per []time.Duration
	for range b.N {
		d, p := churn(b)
		all, per = append(all, d...), append(per, p...)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(benchstat.Median(all)), "median-ms")
	b.ReportMetric(ms(benchstat.Quantile(all, 0.99)), "p99-ms")
	b.ReportMetric(ms(benchstat.Median(per)), "per-claim-median-ms")
}
