package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	xputestutil "github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func withMetrics(reg prometheus.Registerer) func(*Config) {
	return func(c *Config) { c.Metrics = reg }
}

// TestMetricsPrepareThroughTheHelper: claims the kubelet prepares and
// unprepares through the plugin helper's gRPC socket are counted, the
// failed ones by cause, and each call is timed; no claim name is a label.
func TestMetricsPrepareThroughTheHelper(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, fakehost.P800x8(), withMetrics(reg))
	k := startKubelet(t, f.d)
	a, b, vanished, broken := claim("a", "xpu-2"), claim("b", "xpu-2"), claim("vanished", "xpu-9"), claim("broken", "xpu-3")
	for _, c := range []*resourceapi.ResourceClaim{a, b, vanished, broken} {
		k.create(t, c)
	}
	m := f.d.m

	require.Empty(t, k.prepare(t, a).GetError())
	require.Empty(t, k.prepare(t, a).GetError(), "asked again: prepared again")
	require.NotEmpty(t, k.prepare(t, b).GetError())
	require.NotEmpty(t, k.prepare(t, vanished).GetError())
	f.setState(t, 3, "ERROR")
	require.NotEmpty(t, k.prepare(t, broken).GetError())
	require.Empty(t, k.unprepare(t, a))

	require.Equal(t, 2.0, testutil.ToFloat64(m.claims.WithLabelValues("prepare")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.claims.WithLabelValues("unprepare")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.claimErrors.WithLabelValues("prepare", "device_in_use")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.claimErrors.WithLabelValues("prepare", "not_on_node")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.claimErrors.WithLabelValues("prepare", "unhealthy_device")))
	require.Equal(t, 3, testutil.CollectAndCount(m.claimErrors), "one series per cause seen")
	require.Equal(t, uint64(5), xputestutil.HistogramCount(t, reg, "xpu_dra_driver_operation_duration_seconds", "operation", "prepare"))
	require.Equal(t, uint64(1), xputestutil.HistogramCount(t, reg, "xpu_dra_driver_operation_duration_seconds", "operation", "unprepare"))

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestMetricsCauses: the cause labels come from the errors (errors.Is,
// the API's status reasons) and are a fixed set.
func TestMetricsCauses(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("xpu.baidu.com default/a: %w", ErrClaimNotAllocated), "not_allocated"},
		{fmt.Errorf("x: %w: y", ErrUnknownConfig), "unknown_config"},
		{fmt.Errorf("x: %w", ErrNotOnNode), "not_on_node"},
		{fmt.Errorf("x: %w", ErrNoSpec), "no_spec"},
		{fmt.Errorf("x: %w", ErrDeviceUnhealthy), "unhealthy_device"},
		{fmt.Errorf("x: %w", ErrDeviceInUse), "device_in_use"},
		{errors.New("writing the claim record: no space left on device"), "internal"},
	} {
		require.Equal(t, tc.want, claimCause(tc.err), tc.err.Error())
	}
	gr := schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apierrors.NewInvalid(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceSlice"}, "s", nil), "invalid"},
		{apierrors.NewForbidden(gr, "s", errors.New("no")), "forbidden"},
		{apierrors.NewConflict(gr, "s", errors.New("changed")), "conflict"},
		{apierrors.NewAlreadyExists(gr, "s"), "already_exists"},
		{apierrors.NewNotFound(gr, "s"), "not_found"},
		{apierrors.NewTooManyRequests("slow down", 1), "unavailable"},
		{apierrors.NewServiceUnavailable("down"), "unavailable"},
		{errors.New("dial tcp: connection refused"), "other"},
	} {
		require.Equal(t, tc.want, refusalCause(tc.err), tc.err.Error())
	}
}

// TestMetricsSliceWrites: a ResourceSlice the API server refuses is
// counted as a refusal with its cause, and the write that goes through
// afterwards as a write.
func TestMetricsSliceWrites(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, fakehost.P800x8(), withMetrics(reg))
	k := startKubelet(t, f.d)
	var refuse atomic.Bool
	refuse.Store(true)
	k.client.PrependReactor("create", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceSlice"}, "node-1-xpu.baidu.com", field.ErrorList{field.TooMany(field.NewPath("spec", "devices"), 70, 64)})
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx, k.helper) }()
	defer func() { cancel(); <-done }()
	m := f.d.m
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.sliceRefusals.WithLabelValues("create", "invalid")) >= 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 0.0, testutil.ToFloat64(m.sliceWrites.WithLabelValues("create")))
	refuse.Store(false)
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.sliceWrites.WithLabelValues("create")) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1.0, testutil.ToFloat64(m.publishes), "handed to the helper once; the helper retried")
	require.Equal(t, 1, testutil.CollectAndCount(m.sliceRefusals))
}

// TestMetricsHealthAndRelayout: while Run polls the host, an XPU that
// fails and recovers is a health change each way; a card cut from halves into
// quarters is one re-layout; each is a publish.
func TestMetricsHealthAndRelayout(t *testing.T) {
	quarters := fakehosttest.Build(t, fakehost.P800Quarters())
	var mu sync.Mutex
	var tree *fakehost.Tree
	reg := prometheus.NewRegistry()
	f := newFixture(t, fakehost.P800SRIOV(), withMetrics(reg), func(c *Config) {
		c.Discover = func() (*discover.Host, error) {
			mu.Lock()
			defer mu.Unlock()
			return discover.Discover(tree.DiscoverOptions()...)
		}
	})
	mu.Lock()
	tree = f.tree
	mu.Unlock()
	m := f.d.m
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := newRecorder()
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx, pub) }()
	pub.wait(t)
	// Run counts a publish once the publisher has returned, which may be
	// after the recorder has seen it.
	publishes := func(n float64) {
		t.Helper()
		require.Eventually(t, func() bool { return testutil.ToFloat64(m.publishes) == n }, 10*time.Second, 10*time.Millisecond,
			"publishes: %v, want %v", testutil.ToFloat64(m.publishes), n)
	}
	publishes(1)

	// The spec goes (its three XPUs cannot be prepared), then comes back.
	spec := filepath.Join(f.specDir, "baidu.com-xpu.yaml")
	data, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.NoError(t, os.Remove(spec))
	pub.wait(t)
	require.Equal(t, 3.0, testutil.ToFloat64(m.HealthChanges.WithLabelValues("Unhealthy")))
	require.NoError(t, os.WriteFile(spec, data, 0o644))
	pub.wait(t)
	require.Equal(t, 3.0, testutil.ToFloat64(m.HealthChanges.WithLabelValues("Healthy")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.Relayouts))

	fakehosttest.WriteSpec(t, quarters, f.specDir)
	mu.Lock()
	tree = quarters
	mu.Unlock()
	pub.wait(t)
	require.Len(t, pub.last(), 5)
	require.Equal(t, 1.0, testutil.ToFloat64(m.Relayouts))
	publishes(4)
	cancel()
	require.NoError(t, <-done)
}
