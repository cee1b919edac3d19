package exporter

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// A burst of scrapes, concurrent and one after the other, within
// MinInterval of a collection runs xpu-smi -m once: the client does not
// choose how often xpu-smi opens the XPUs. Past MinInterval the next scrape
// collects again.
func TestCollectionShared(t *testing.T) {
	now := time.Now()
	var clock sync.Mutex
	c, tr := hostCollector(t, fakehost.P800x8(), func(*fakehost.Tree, *fakehost.XPUSMIState) {}, Config{MinInterval: 5 * time.Second})
	prog, runs := countingXPUSMI(t, tr)
	c.o.XPUSMIPath = prog
	c.o.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }

	var wg sync.WaitGroup
	results := make([]map[string]float64, 16)
	for i := range results {
		wg.Go(func() { results[i] = scrape(t, c) })
	}
	wg.Wait()
	for range 16 {
		results = append(results, scrape(t, c))
	}
	for _, s := range results {
		require.Len(t, named(s, "xpu_memory_used_bytes"), 8)
		require.Equal(t, 0.0, value(t, s, `xpu_exporter_collection_stale{}`))
	}
	require.Equal(t, 1, countOf(runs(), "-m"), "32 scrapes, one collection: %q", runs())
	require.Equal(t, 8, countOf(runs(), "-i 0 -q")+countOf(runs(), "-i 1 -q")+countOf(runs(), "-i 2 -q")+countOf(runs(), "-i 3 -q")+
		countOf(runs(), "-i 4 -q")+countOf(runs(), "-i 5 -q")+countOf(runs(), "-i 6 -q")+countOf(runs(), "-i 7 -q"), "each index asked once: %q", runs())

	clock.Lock()
	now = now.Add(4 * time.Second)
	clock.Unlock()
	s := scrape(t, c)
	require.Equal(t, 4.0, value(t, s, `xpu_exporter_collection_age_seconds{}`))
	require.Equal(t, 1, countOf(runs(), "-m"))
	clock.Lock()
	now = now.Add(time.Second)
	clock.Unlock()
	scrape(t, c)
	require.Equal(t, 2, countOf(runs(), "-m"), "past MinInterval a scrape collects again")
}

// An xpu-smi that does not end holds no scrape: a scrape waits at most
// Wait for the collection in progress and is served the last finished
// one, marked stale; no second xpu-smi starts while the first runs; and
// Healthy fails once the collection has run longer than StuckAfter. The
// hanging fake xpu-smi stands for one in uninterruptible sleep, which no
// signal ends: the runner lets it live for its timeout (3 s), longer than
// the scrape's wait and the stuck bound, which is what such a child looks
// like to the collector until it ends. When it is killed at last, the next
// collection is fresh again.
func TestCollectionStuckXPUSMI(t *testing.T) {
	c, tr := hostCollector(t, fakehost.P800x8(), func(*fakehost.Tree, *fakehost.XPUSMIState) {}, Config{
		Wait: 200 * time.Millisecond, StuckAfter: time.Second,
	})
	c.o.XPUSMI.Timeout = 3 * time.Second
	prog, runs := countingXPUSMI(t, tr)
	c.o.XPUSMIPath = prog
	// A first collection that ends (Wait is short: a loaded machine may
	// need more than one scrape to see it).
	var good map[string]float64
	testutil.Eventually(t, func(t testing.TB) bool {
		good = scrape(t, c)
		return good[`xpu_exporter_collection_stale{}`] == 0 && len(named(good, "xpu_memory_used_bytes")) == 8
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Healthy())

	hang := fakehost.DefaultTelemetry(tr)
	hang.Mode = fakehost.SMIHang
	require.NoError(t, fakehost.WriteXPUSMIState(tr.Root, hang))
	runsBefore := runs()
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			begin := time.Now()
			s := scrape(t, c)
			assert.Less(t, time.Since(begin), time.Second, "a scrape waits for the collection at most Wait")
			assert.Equal(t, 1.0, s[`xpu_exporter_collection_stale{}`])
			assert.Len(t, named(s, "xpu_memory_used_bytes"), 8, "the last finished collection's series")
		})
	}
	wg.Wait()
	ran := countOf(runs(), "-m")
	require.Equal(t, 1, ran-countOf(runsBefore, "-m"), "one xpu-smi for all the scrapes while it hangs: %q", runs())
	require.NoError(t, c.Healthy(), "not stuck yet")
	time.Sleep(time.Until(start.Add(1200 * time.Millisecond)))
	s := scrape(t, c)
	require.Equal(t, 1.0, value(t, s, `xpu_exporter_collection_stale{}`))
	require.ErrorIs(t, c.Healthy(), ErrStuck)
	require.ErrorContains(t, c.Healthy(), "a collection has run for")
	require.Equal(t, ran, countOf(runs(), "-m"))

	// Killed at its timeout: the collection ends (xpu-smi down), the next
	// one runs the working xpu-smi again.
	require.NoError(t, fakehost.WriteXPUSMIState(tr.Root, fakehost.DefaultTelemetry(tr)))
	require.Eventually(t, func() bool { return c.Healthy() == nil }, 5*time.Second, 50*time.Millisecond)
	testutil.Eventually(t, func(t testing.TB) bool {
		s = scrape(t, c)
		return s[`xpu_exporter_collection_stale{}`] == 0 && s[`xpu_exporter_source_up{source="xpu-smi"}`] == 1
	}, 10*time.Second, 10*time.Millisecond, "%v", s)
	require.Len(t, named(s, "xpu_memory_used_bytes"), 8)
}
