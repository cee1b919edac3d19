package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

// churnSeed seeds the churn's sizes and choices; a failure names it.
const churnSeed = 20261206

// TestDRADynamicChurn: churnPods pods (48; XPU_E2E_CHURN_PODS sets
// another count, e.g. 100 for a longer run) of random sizes (whole, half,
// quarter; seeded) on a node of 8 whole P800 cards, at most 8 at a time:
// each round deletes 1 to 3 running pods and starts as many new ones, so
// that cards change sizes under the others' claims. The driver runs with
// --idle-layout whole. Once, at a re-layout the fake kernel makes slow
// (udev late by 3 s), the driver is killed (SIGKILL) right after the
// kernel saw the write, and started again on its state: it finishes or
// puts back that card before anything else. It proves that:
//   - every pod ran with exactly the VF (or the PF) of its device;
//   - no Prepare failed because the card held claims of another size
//     (dra.ErrCardBusy's message in no pod's events);
//   - no card ever held claims of two sizes (the allocations, watched
//     every 200 ms through the churn);
//   - after each round every card has exactly the VFs of its claims'
//     size, or none when it has no claim (idle cards go whole), and at
//     the end every card is whole, no claim record is left and every
//     layout record is completed.
func TestDRADynamicChurn(t *testing.T) {
	const (
		cards     = 8
		live      = 8
		killRound = 3
	)
	churnPods := 48
	if v := os.Getenv("XPU_E2E_CHURN_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "XPU_E2E_CHURN_PODS")
		require.Greater(t, n, live*killRound, "XPU_E2E_CHURN_PODS must be more than %d: the driver is killed in round %d of pods up to %d at a time", live*killRound, killRound, live)
		churnPods = n
	}
	start := time.Now()
	d := startDynamicWith(t, cards, fakehost.SRIOVOptions{SlowUdevDelay: 3 * time.Second}, "--idle-layout", "whole")
	t.Logf("seed %d; cluster and driver up in %s", churnSeed, time.Since(start).Round(time.Millisecond))
	sizes := []struct {
		template string
		count    int
	}{{"churn-whole", 0}, {"churn-half", 2}, {"churn-quarter", 4}}
	d.ApplyObjects(t, claimTemplate("churn-whole", 1, false, selWhole))
	d.ApplyObjects(t, claimTemplate("churn-half", 1, false, selHalf))
	d.ApplyObjects(t, claimTemplate("churn-quarter", 1, false, selQuarter))
	rng := rand.New(rand.NewPCG(churnSeed, 0))

	// The allocations, watched for a card with claims of two sizes.
	stop := make(chan struct{})
	var watched sync.WaitGroup
	var stopOnce sync.Once
	stopWatching := func() { stopOnce.Do(func() { close(stop) }); watched.Wait() }
	var mixed []string
	looks := 0 // allocated claims seen, over all the watches
	watched.Add(1)
	go func() {
		defer watched.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			l, err := d.Client.ResourceV1().ResourceClaims("default").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				continue
			}
			byCard := map[int]map[int][]string{}
			for _, c := range l.Items {
				if c.Status.Allocation == nil {
					continue
				}
				looks++
				for _, r := range c.Status.Allocation.Devices.Results {
					s, ok := lookupSlot(r.Device)
					if !ok {
						mixed = append(mixed, "unknown device "+r.Device)
						continue
					}
					if byCard[s.card] == nil {
						byCard[s.card] = map[int][]string{}
					}
					byCard[s.card][s.count] = append(byCard[s.card][s.count], c.Name+"="+r.Device)
				}
			}
			for card, counts := range byCard {
				if len(counts) > 1 || len(counts[0]) > 1 {
					mixed = append(mixed, fmt.Sprintf("card %d: %v", card, counts))
				}
			}
		}
	}()
	defer stopWatching()

	var running []string
	count := map[string]int{}
	next := 0
	// killed gets what the kill did, once.
	type killResult struct {
		what string
		err  error
	}
	killed := make(chan killResult, 1)
	wasKilled := false
	for round := 0; next < churnPods; round++ {
		// Out: 1 to 3 random running pods (none while filling up).
		if len(running) == live {
			var out []string
			for range 1 + rng.IntN(3) {
				i := rng.IntN(len(running))
				out = append(out, running[i])
				running = slices.Delete(running, i, i+1)
			}
			zero := int64(0)
			for _, name := range out {
				require.NoError(t, d.Client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
			}
			for _, name := range out {
				d.deletePod(t, name)
			}
		}
		d.waitLayouts(t, running, count, "round %d", round)
		if round == killRound {
			// Armed: every card's next change is slow, and the first
			// write from now on is the driver's re-layout at a Prepare.
			for _, pf := range d.kernel.PFs() {
				d.kernel.FailNext(pf, fakehost.FaultSlowUdev)
			}
			writes := len(d.kernel.Writes())
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					w := d.kernel.Writes()
					if len(w) <= writes {
						continue
					}
					r := killResult{what: fmt.Sprintf("killed after the write of %s to %s's sriov_numvfs", w[writes].Value, w[writes].PF)}
					r.err = d.killProcess()
					if r.err == nil {
						time.Sleep(500 * time.Millisecond)
						r.err = d.startProcess()
					}
					killed <- r
					return
				}
			}()
		}
		// In: new pods of random sizes up to live.
		var in []string
		for len(running)+len(in) < live && next < churnPods {
			size := sizes[rng.IntN(len(sizes))]
			name := fmt.Sprintf("churn-%03d", next)
			next++
			d.ApplyObjects(t, xpuPod(name, d.image, "template:"+size.template))
			in = append(in, name)
			count[name] = size.count
		}
		for _, name := range in {
			d.WaitPodRunning(t, "default", name, podTimeout)
			s := d.allocatedSlot(t, name)
			require.Equal(t, count[name], s.count, "pod %s got %s", name, s.name)
			d.seesSlot(t, name, s)
			running = append(running, name)
		}
		select {
		case r := <-killed:
			require.NoError(t, r.err)
			wasKilled = true
			t.Logf("round %d: the driver was %s and started again; it said: %s", round, r.what,
				regexp.MustCompile(`card \S+: its re-layout from \d+ to \d+ VFs for claim \S+ [^"]*`).FindString(d.log.String()))
		default:
		}
	}
	require.True(t, wasKilled, "no re-layout after round %d: the driver was never killed", killRound)
	require.Regexp(t, `its re-layout from \d+ to \d+ VFs for claim \S+ (was done before the driver stopped: kept|had not changed it when the driver stopped|stopped half way: putting it back)`, d.log.String(),
		"the restarted driver finished the re-layout it was killed in")

	for _, name := range running {
		d.deletePod(t, name)
	}
	d.waitLayouts(t, nil, count, "the end")
	stopWatching()
	require.Empty(t, mixed, "a card with claims of two sizes")
	require.Greater(t, looks, 100, "the watch of the allocations saw claims")
	for i := range next {
		for _, e := range d.events(t, fmt.Sprintf("churn-%03d", i)) {
			require.NotContains(t, e, dra.ErrCardBusy.Error(), "a Prepare failed for incompatibility")
		}
	}
	for _, r := range d.layoutRecords(t) {
		require.Equal(t, "PrepareCompleted", r.Phase, "layout record of %s", r.Card)
	}
	t.Logf("TestDRADynamicChurn: %d pods in %s; writes to sriov_numvfs: %d", next, time.Since(start).Round(time.Millisecond), len(d.kernel.Writes()))
}

// waitLayouts waits until the driver holds a claim record per running pod
// and every card has the VF count of its pods' devices, none without a
// pod (--idle-layout whole).
func (d *dynNode) waitLayouts(t *testing.T, running []string, count map[string]int, msgAndArgs ...any) {
	t.Helper()
	want := make([]int, len(d.kernel.PFs()))
	for _, name := range running {
		want[d.allocatedSlot(t, name).card] = count[name]
	}
	testutil.Eventually(t, func(t testing.TB) bool {
		return assert.Len(t, d.records(t), len(running), "claim records") && assert.Equal(t, want, d.numVFs(), "the cards' VFs")
	}, podTimeout, 250*time.Millisecond, msgAndArgs...)
}

// layoutRecord is the part of the driver's layout record the tests read.
type layoutRecord struct {
	Phase string `json:"phase"`
	Card  string `json:"card"`
}

// layoutRecords are the driver's layout records.
func (d *dynNode) layoutRecords(t testing.TB) []layoutRecord {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(d.dataDir, "claims", "layout-*.json"))
	require.NoError(t, err)
	var out []layoutRecord
	for _, m := range matches {
		data, err := os.ReadFile(m)
		require.NoError(t, err)
		var r layoutRecord
		require.NoError(t, json.Unmarshal(data, &r), m)
		out = append(out, r)
	}
	return out
}

// killProcess kills the driver (SIGKILL: nothing of its own runs) and
// waits for it to be gone: what a goroutine may call.
func (d *dynNode) killProcess() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.driver.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing the driver: %w", err)
	}
	select {
	case <-d.exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the driver (pid %d) did not die of SIGKILL", d.driver.Process.Pid)
	}
}
