package dra

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

// clock is a test clock moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// reserved is c reserved for a pod, as the scheduler leaves it.
func reserved(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod-" + c.Name, UID: types.UID("pod-uid-" + c.Name)}}
	return c
}

// The sweep forgets the records of claims the kubelet will not unprepare
// (gone, created again, deallocated, allocated elsewhere, reserved for no
// pod) once they have been stale for the grace, and only those: a live
// claim keeps its record, a claim that is live again is not swept, and
// the swept device can be prepared for another claim.
func TestSweep(t *testing.T) {
	live, gone, again, freed, moved, idle, back := claim("live", "xpu-0"), claim("gone", "xpu-1"), claim("again", "xpu-2"), claim("freed", "xpu-3"), claim("moved", "xpu-4"), claim("idle", "xpu-5"), claim("back", "xpu-6")
	recreated := reserved(again)
	recreated.UID = "uid-again-2"
	deallocated := reserved(freed)
	deallocated.Status.Allocation = nil
	elsewhere := reserved(moved)
	elsewhere.Status.Allocation.Devices.Results[0].Pool = "node-2"
	api := fake.NewClientset(reserved(live), recreated, deallocated, elsewhere, idle, back)
	clk := &clock{now: testClock()}
	reg := prometheus.NewRegistry()
	f := newFixture(t, fakehost.P800x8(), func(c *Config) {
		c.KubeClient, c.Clock, c.Metrics, c.SweepGrace = api, clk.Now, reg, time.Minute
	})
	d := f.d
	all := []*resourceapi.ResourceClaim{live, gone, again, freed, moved, idle, back}
	out, err := d.PrepareResourceClaims(context.Background(), all)
	require.NoError(t, err)
	for _, c := range all {
		require.NoError(t, out[c.UID].Err, c.Name)
	}

	// Found stale, not swept yet: the kubelet may still be stopping the
	// containers of a pod deleted with --grace-period 0.
	swept, err := d.Sweep(context.Background())
	require.NoError(t, err)
	require.Empty(t, swept)
	require.Len(t, d.Prepared(), 7)
	require.True(t, f.log.Has("prepared claim default/gone (uid-gone) is stale (its ResourceClaim is deleted): its record is swept in 1m0s unless the kubelet unprepares it first"), f.log.String())
	_, err = prepareOne(t, d, claim("next", "xpu-1"))
	require.ErrorIs(t, err, ErrDeviceInUse)

	// Meanwhile the claim "back" is reserved again: live, its stale time
	// forgotten.
	_, err = api.ResourceV1().ResourceClaims("default").Update(context.Background(), reserved(back), metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = d.Sweep(context.Background())
	require.NoError(t, err)
	clk.add(time.Minute)
	swept, err = d.Sweep(context.Background())
	require.NoError(t, err)
	require.ElementsMatch(t, []types.NamespacedName{
		{Namespace: "default", Name: "gone"},
		{Namespace: "default", Name: "again"},
		{Namespace: "default", Name: "freed"},
		{Namespace: "default", Name: "moved"},
		{Namespace: "default", Name: "idle"},
	}, swept)
	require.ElementsMatch(t, []types.UID{"uid-live", "uid-back"}, d.Prepared())
	require.ElementsMatch(t, []string{"uid-live.json", "uid-back.json"}, f.records(t))
	for reason, want := range map[string]float64{staleDeleted: 1, staleRecreated: 1, staleDeallocated: 1, staleNotOnNode: 1, staleUnreserved: 1} {
		require.Equal(t, want, promtestutil.ToFloat64(d.m.swept.WithLabelValues(reason)), reason)
	}
	require.True(t, f.log.Has("swept (its ResourceClaim is deleted) claim default/gone (uid-gone): xpua=xpu-1"), f.log.String())

	// The swept device is free for the next claim.
	_, err = prepareOne(t, d, claim("next", "xpu-1"))
	require.NoError(t, err)
}

// A claim the kubelet unprepares during its grace is not swept (nothing
// to sweep, no error), nor counted.
func TestSweepUnpreparedMeanwhile(t *testing.T) {
	gone := claim("gone", "xpu-0")
	clk := &clock{now: testClock()}
	f := newFixture(t, fakehost.P800x8(), func(c *Config) { c.KubeClient, c.Clock = fake.NewClientset(), clk.Now })
	_, err := prepareOne(t, f.d, gone)
	require.NoError(t, err)
	_, err = f.d.Sweep(context.Background())
	require.NoError(t, err)
	unprepareOne(t, f.d, gone)
	clk.add(DefaultSweepGrace)
	swept, err := f.d.Sweep(context.Background())
	require.NoError(t, err)
	require.Empty(t, swept)
	require.Empty(t, f.d.stale)
	require.Zero(t, promtestutil.ToFloat64(f.d.m.swept.WithLabelValues(staleDeleted)))
}

// An API server that does not answer sweeps nothing: the error names the
// claim it was asked about, and the records stay.
func TestSweepAPIError(t *testing.T) {
	api := fake.NewClientset()
	refused := errors.New("connection refused")
	api.PrependReactor("get", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, refused })
	clk := &clock{now: testClock()}
	f := newFixture(t, fakehost.P800x8(), func(c *Config) { c.KubeClient, c.Clock = api, clk.Now })
	for _, c := range []*resourceapi.ResourceClaim{claim("a", "xpu-0"), claim("b", "xpu-1")} {
		_, err := prepareOne(t, f.d, c)
		require.NoError(t, err)
	}
	for range 2 {
		swept, err := f.d.Sweep(context.Background())
		require.ErrorIs(t, err, refused)
		require.ErrorContains(t, err, "reading ResourceClaim default/")
		require.Empty(t, swept)
		clk.add(DefaultSweepGrace)
	}
	require.Len(t, f.d.Prepared(), 2)
	// Only one GET per sweep once the API server fails.
	gets := 0
	for _, a := range api.Actions() {
		if a.GetVerb() == "get" {
			gets++
		}
	}
	require.Equal(t, 2, gets)
}

// Without a client there is no sweep.
func TestSweepWithoutClient(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	_, err := prepareOne(t, f.d, claim("a", "xpu-0"))
	require.NoError(t, err)
	swept, err := f.d.Sweep(context.Background())
	require.NoError(t, err)
	require.Empty(t, swept)
	require.Len(t, f.d.Prepared(), 1)
}

// Run sweeps at start and then every SweepInterval: a record of a claim
// deleted while the driver was down is gone once its grace has passed.
func TestRunSweeps(t *testing.T) {
	clk := &clock{now: testClock()}
	f := newFixture(t, fakehost.P800x8())
	_, err := prepareOne(t, f.d, claim("gone", "xpu-0"))
	require.NoError(t, err)
	// The driver restarts; the claim was deleted meanwhile.
	d := f.driver(t, func(c *Config) {
		c.KubeClient, c.Clock, c.SweepInterval, c.SweepGrace = fake.NewClientset(), clk.Now, 10*time.Millisecond, time.Minute
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, newRecorder()) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	testutil.Eventually(t, func(testing.TB) bool { return f.log.Has("prepared claim default/gone (uid-gone) is stale") }, 10*time.Second, 5*time.Millisecond)
	require.Len(t, d.Prepared(), 1)
	clk.add(time.Minute)
	testutil.Eventually(t, func(testing.TB) bool { return len(d.Prepared()) == 0 }, 10*time.Second, 5*time.Millisecond)
}
