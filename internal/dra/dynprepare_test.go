package dra

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The tests of this file prepare dynamic mode's devices on the fake SR-IOV
// kernel (fakehost.StartSRIOV: FUSE, root), which answers sriov_numvfs
// writes as the kernel and the driver do and creates the VF nodes after a
// udev delay.

// dynFixture is a dynamic-mode driver on a fake host served by the fake
// SR-IOV kernel, whose writer regenerates the node spec (index and
// PCI-address names) after each re-layout.
type dynFixture struct {
	tree     *fakehost.Tree
	k        *fakehost.SRIOVKernel
	specDir  string
	stateDir string
	log      *logtest.Recorder
	writer   sriov.Config
	d        *Driver
}

func newDynFixture(t testing.TB, h fakehost.Host, mods ...func(*Config)) *dynFixture {
	t.Helper()
	tree := fakehosttest.Build(t, h)
	f := &dynFixture{tree: tree, k: fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{UdevDelay: -1}), specDir: t.TempDir(), stateDir: filepath.Join(t.TempDir(), "claims"), log: &logtest.Recorder{}}
	f.writer = sriov.Config{
		Config: partition.Config{DevRoot: tree.Root, DriverRoot: tree.Root, DiscoverOptions: tree.DiscoverOptions()},
		Settle: 2 * time.Second, AfterApply: f.writeSpec,
	}
	host, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	require.NoError(t, f.writeSpec(host))
	f.d = f.driver(t, mods...)
	return f
}

// writeSpec writes the node spec of h, with index and PCI-address names.
func (f *dynFixture) writeSpec(h *discover.Host) error {
	spec, _, err := cdispec.New(h, cdispec.Settings{NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex, cdispec.NameByBDF}, NoHooks: true})
	if err != nil {
		return err
	}
	return cdispec.WriteFile(filepath.Join(f.specDir, "baidu.com-xpu.yaml"), spec, cdispec.FormatYAML)
}

// driver returns a new driver on the fixture's host, spec and state: a
// restarted driver.
func (f *dynFixture) driver(t testing.TB, mods ...func(*Config)) *Driver {
	t.Helper()
	w := f.writer
	cfg := Config{
		NodeName: "node-1", Discover: discoverTree(f.tree), SpecDirs: []string{f.specDir},
		StateDir: f.stateDir, Clock: testClock, Log: f.log, PollInterval: 20 * time.Millisecond,
		Partitions: PartitionsDynamic, Layout: &w,
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	d, err := New(cfg)
	require.NoError(t, err)
	return d
}

// prepare prepares c alone and returns its CDI devices or its error.
func prepareOne(t testing.TB, d *Driver, c *resourceapi.ResourceClaim) ([]string, error) {
	t.Helper()
	out, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	require.NoError(t, err)
	r := out[c.UID]
	var ids []string
	for _, dev := range r.Devices {
		ids = append(ids, dev.CDIDeviceIDs...)
	}
	return ids, r.Err
}

func unprepareOne(t testing.TB, d *Driver, c *resourceapi.ResourceClaim) {
	t.Helper()
	out, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: c.UID}})
	require.NoError(t, err)
	require.NoError(t, out[c.UID])
}

// writesTo are the values written to pf's sriov_numvfs since write from.
func writesTo(k *fakehost.SRIOVKernel, pf string, from int) []string {
	var out []string
	for _, w := range k.Writes()[from:] {
		if w.PF == pf {
			v := w.Value
			if w.Errno != 0 {
				v += ":" + w.Errno.Error()
			}
			out = append(out, v)
		}
	}
	return out
}

// record reads the layout record of card addr.
func (f *dynFixture) record(t testing.TB, addr string) *layoutRecord {
	t.Helper()
	rec, err := readLayoutRecord(filepath.Join(f.stateDir, layoutPrefix+addr+".json"))
	require.NoError(t, err)
	return rec
}

// P800SRIOV: card 0 (0000:03:00.0) has 2 VFs (.1, .2), card 1
// (0000:83:00.0) is whole.
const (
	card0 = "0000:03:00.0"
	card1 = "0000:83:00.0"
)

func TestDynamicPrepare(t *testing.T) {
	f := newDynFixture(t, fakehost.P800SRIOV())
	d := f.d

	// A slot of the count the card has: its VF, nothing written.
	n := len(f.k.Writes())
	a := claim("a", "xpu-0-h1")
	ids, err := prepareOne(t, d, a)
	require.NoError(t, err)
	require.Equal(t, []string{"baidu.com/xpu=0000:03:00.2"}, ids)
	require.Empty(t, f.k.Writes()[n:])
	// Prepared again (the kubelet retries): the same answer.
	ids, err = prepareOne(t, d, a)
	require.NoError(t, err)
	require.Equal(t, []string{"baidu.com/xpu=0000:03:00.2"}, ids)

	// The same slot for another claim: refused.
	_, err = prepareOne(t, d, claim("same", "xpu-0-h1"))
	require.ErrorIs(t, err, ErrDeviceInUse)
	require.ErrorContains(t, err, "default/a")

	// Another count on a card a claim holds: refused, naming the card,
	// its count, its claims and the claim's want; nothing written.
	_, err = prepareOne(t, d, claim("b", "xpu-0-q0"))
	require.ErrorIs(t, err, ErrCardBusy)
	require.ErrorContains(t, err, "card 0000:03:00.0 holds 2 VFs for claim default/a; the claim wants 4 VFs (its slot 0)")
	require.Empty(t, f.k.Writes()[n:])

	// A whole card without claims: laid out (no 0 first: it has none),
	// the spec regenerated, the VF of slot 3 answered, the re-layout
	// recorded as completed.
	ids, err = prepareOne(t, d, claim("c", "xpu-1-q3"))
	require.NoError(t, err)
	require.Equal(t, []string{"4"}, writesTo(f.k, card1, n))
	require.Equal(t, 4, f.k.NumVFs(card1))
	vfs, err := sriov.VirtFns(f.tree.Root, card1)
	require.NoError(t, err)
	require.Equal(t, []string{"baidu.com/xpu=" + vfs[3]}, ids)
	require.Equal(t, &layoutRecord{Version: 1, Phase: phaseCompleted, Card: card1, From: 0, To: 4, Claim: "default/c", ClaimUID: "uid-c"}, f.record(t, card1))

	// Unprepare frees the slot, and the layout stays.
	unprepareOne(t, d, a)
	require.Equal(t, 2, f.k.NumVFs(card0))
	// Now card 0 has no claim: 0, then 4.
	n = len(f.k.Writes())
	ids, err = prepareOne(t, d, claim("b", "xpu-0-q0"))
	require.NoError(t, err)
	require.Equal(t, []string{"0", "4"}, writesTo(f.k, card0, n))
	require.Equal(t, []string{"baidu.com/xpu=0000:03:00.1"}, ids)

	// The whole card 1 while a claim holds one of its quarters: refused.
	_, err = prepareOne(t, d, claim("whole", "xpu-1"))
	require.ErrorIs(t, err, ErrCardBusy)
	require.ErrorContains(t, err, "card 0000:83:00.0 holds 4 VFs for claim default/c; the claim wants the whole card (0 VFs)")
}

// A card a process holds is never laid out: the claim's error names the
// holder, and nothing is written.
func TestDynamicPrepareCardInUse(t *testing.T) {
	f := newDynFixture(t, fakehost.P800SRIOV())
	require.True(t, f.tree.RealNodes)
	require.NoError(t, fakehost.FakeOpenFD(f.tree.Root, 4242, 9, "/dev/xpu2"))
	n := len(f.k.Writes())
	_, err := prepareOne(t, f.d, claim("q", "xpu-0-q1"))
	require.ErrorIs(t, err, sriov.ErrInUse)
	require.ErrorContains(t, err, "card 0000:03:00.0 has 2 VFs, the claim wants 4 VFs (its slot 1)")
	require.ErrorContains(t, err, "pid 4242")
	require.Empty(t, f.k.Writes()[n:])
	require.Equal(t, &layoutRecord{Version: 1, Phase: phaseCompleted, Card: card0, From: 2, To: 4, Claim: "default/q", ClaimUID: "uid-q", RolledBack: true}, f.record(t, card0))
}

// The whole card in dynamic mode: a card with VFs and no claim goes back
// to whole and its PF is answered.
func TestDynamicPrepareWhole(t *testing.T) {
	f := newDynFixture(t, fakehost.P800SRIOV())
	n := len(f.k.Writes())
	ids, err := prepareOne(t, f.d, claim("w", "xpu-0"))
	require.NoError(t, err)
	require.Equal(t, []string{"0"}, writesTo(f.k, card0, n))
	require.Equal(t, []string{"baidu.com/xpu=" + card0}, ids)
	_, err = prepareOne(t, f.d, claim("w2", "xpu-0"))
	require.ErrorIs(t, err, ErrDeviceInUse)
}

// Faults of the kernel during a re-layout: the writer puts the card back,
// the claim fails naming the card, the record says it was rolled back.
func TestDynamicPrepareKernelFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  fakehost.Fault
		writes []string
	}{
		{"the write of the new count fails", fakehost.FaultEnableError, []string{"0", "4:input/output error", "2"}},
		{"the kernel never shows the VFs' nodes", fakehost.FaultNoNodes, []string{"0", "4", "0", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDynFixture(t, fakehost.P800SRIOV())
			f.writer.Settle = 300 * time.Millisecond
			d := f.driver(t)
			n := len(f.k.Writes())
			f.k.FailNext(card0, tc.fault)
			_, err := prepareOne(t, d, claim("q", "xpu-0-q2"))
			require.Error(t, err)
			require.ErrorContains(t, err, "card 0000:03:00.0 has 2 VFs, the claim wants 4 VFs (its slot 2)")
			require.Equal(t, tc.writes, writesTo(f.k, card0, n))
			require.Equal(t, 2, f.k.NumVFs(card0))
			require.True(t, f.record(t, card0).RolledBack)
			require.Empty(t, d.Prepared())
			// The next try, without the fault, goes through.
			_, err = prepareOne(t, d, claim("q", "xpu-0-q2"))
			require.NoError(t, err)
			require.Equal(t, 4, f.k.NumVFs(card0))
		})
	}
}

// errDied stands for the driver's process ending in the middle of a
// re-layout.
var errDied = errors.New("died")

// dieAfter returns a relayout that runs steps on the card and then ends
// the goroutine, as a killed driver ends: nothing after it runs.
func dieAfter(steps func(ctx context.Context, addr string, n int)) func(ctx context.Context, addr string, n int) error {
	return func(ctx context.Context, addr string, n int) error {
		steps(ctx, addr, n)
		runtime.Goexit()
		return errDied
	}
}

// prepareDying prepares c on a driver that dies during it.
func prepareDying(t *testing.T, d *Driver, c *resourceapi.ResourceClaim) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c}) })
	wg.Wait()
}

// writeNumVFs writes the card's sriov_numvfs as the writer does, without
// waiting for the kernel.
func writeNumVFs(t *testing.T, f *dynFixture, addr string, n int) {
	t.Helper()
	require.NoError(t, os.WriteFile(f.tree.Path("/sys/bus/pci/devices/"+addr+"/sriov_numvfs"), []byte(strconv.Itoa(n)+"\n"), 0o644))
}

// A driver that dies between the steps of a re-layout: the record says
// PrepareStarted; the next driver (at Run, or at its first Prepare)
// finishes the card's layout when the kernel shows it complete, puts it
// back to its old count otherwise, and the kubelet's retry then prepares
// the claim.
func TestDynamicPrepareRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// die are the steps done before the driver dies.
		die func(t *testing.T, f *dynFixture) func(ctx context.Context, addr string, n int)
		// after is the card's count after the restart's recovery, and
		// rolledBack what its record says.
		after      int
		rolledBack bool
	}{
		{"before any write", func(*testing.T, *dynFixture) func(context.Context, string, int) {
			return func(context.Context, string, int) {}
		}, 2, true},
		{"after the write of 0", func(t *testing.T, f *dynFixture) func(context.Context, string, int) {
			return func(_ context.Context, addr string, _ int) {
				writeNumVFs(t, f, addr, 0)
				require.NoError(t, f.k.Settle(2*time.Second))
			}
		}, 2, true},
		{"after the write of the new count, before the kernel showed it", func(t *testing.T, f *dynFixture) func(context.Context, string, int) {
			return func(_ context.Context, addr string, n int) {
				writeNumVFs(t, f, addr, 0)
				require.NoError(t, f.k.Settle(2*time.Second))
				f.k.FailNext(addr, fakehost.FaultNoNodes)
				writeNumVFs(t, f, addr, n)
			}
		}, 2, true},
		{"after the whole re-layout", func(t *testing.T, f *dynFixture) func(context.Context, string, int) {
			return func(ctx context.Context, addr string, n int) {
				require.NoError(t, applyLayout(f.writer)(ctx, addr, n))
			}
		}, 4, false},
	} {
		for _, atRun := range []bool{true, false} {
			t.Run(tc.name+"/atRun="+strconv.FormatBool(atRun), func(t *testing.T) {
				f := newDynFixture(t, fakehost.P800SRIOV())
				c := claim("q", "xpu-0-q2")
				dying := f.driver(t, func(c *Config) { c.relayout = dieAfter(tc.die(t, f)) })
				prepareDying(t, dying, c)
				require.Equal(t, phaseStarted, f.record(t, card0).Phase)
				require.Empty(t, dying.Prepared())

				d := f.driver(t)
				if atRun {
					// The restarted driver, at Run, before its first
					// slice.
					ctx, cancel := context.WithCancel(context.Background())
					pub, done := newRecorder(), make(chan error, 1)
					go func() { done <- d.Run(ctx, pub) }()
					pub.wait(t)
					cancel()
					require.NoError(t, <-done)
					require.Equal(t, tc.after, f.k.NumVFs(card0), f.log.String())
					rec := f.record(t, card0)
					require.Equal(t, phaseCompleted, rec.Phase)
					require.Equal(t, tc.rolledBack, rec.RolledBack)
					card, settled := d.countOf(card0)
					require.True(t, settled, "card 0 is between counts")
					require.Equal(t, tc.after, card)
				}

				// The kubelet's retry (for a driver not run yet, its
				// first Prepare finishes the record first).
				ids, err := prepareOne(t, d, c)
				require.NoError(t, err, f.log.String())
				vfs, err := sriov.VirtFns(f.tree.Root, card0)
				require.NoError(t, err)
				require.Equal(t, []string{"baidu.com/xpu=" + vfs[2]}, ids)
				require.Equal(t, phaseCompleted, f.record(t, card0).Phase)
			})
		}
	}
}

// With IdleWhole, the card whose last claim is unprepared goes back to
// whole; by default it keeps its layout.
func TestDynamicUnprepareIdle(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run("IdleWhole="+strconv.FormatBool(whole), func(t *testing.T) {
			f := newDynFixture(t, fakehost.P800SRIOV())
			d := f.driver(t, func(c *Config) { c.IdleWhole = whole })
			a, b := claim("a", "xpu-1-h0"), claim("b", "xpu-1-h1")
			for _, c := range []*resourceapi.ResourceClaim{a, b} {
				_, err := prepareOne(t, d, c)
				require.NoError(t, err)
			}
			require.Equal(t, 2, f.k.NumVFs(card1))
			unprepareOne(t, d, a)
			require.Equal(t, 2, f.k.NumVFs(card1), "a claim still holds the card")
			unprepareOne(t, d, b)
			want := 2
			if whole {
				want = 0
			}
			require.Equal(t, want, f.k.NumVFs(card1))
		})
	}
}

func TestParseDynamicName(t *testing.T) {
	for _, tc := range []struct {
		name              string
		card, count, slot int
		ok                bool
	}{
		{"xpu-3", 3, 0, 0, true},
		{"xpu-3-h1", 3, 2, 1, true},
		{"xpu-12-q3", 12, 4, 3, true},
		{"xpu-0-v3-2", 0, 3, 2, true},
		{"xpu-3-q4", 0, 0, 0, false},
		{"xpu-3-h01", 0, 0, 0, false},
		{"xpu-03", 0, 0, 0, false},
		{"xpu-3-v4-1", 0, 0, 0, false}, // a count with a short name
		{"xpu-3-x1", 0, 0, 0, false},
		{"gpu-3", 0, 0, 0, false},
		{"xpu-", 0, 0, 0, false},
		{"xpu-3-", 0, 0, 0, false},
	} {
		card, count, slot, ok := parseDynamicName(tc.name)
		require.Equal(t, tc.ok, ok, tc.name)
		if ok {
			require.Equal(t, []int{tc.card, tc.count, tc.slot}, []int{card, count, slot}, tc.name)
		}
	}
}

// An unreadable layout record (garbage, an unknown phase, too large, a
// link) keeps its card untouched, naming the file; the other cards go on.
func TestDynamicPrepareBadRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, path string)
		want  string
	}{
		{"garbage", func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, []byte("{"), 0o600)) }, "reading the layout record: parsing "},
		{"unknown phase", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte(`{"version":1,"phase":"Half","card":"0000:03:00.0","from":2,"to":4}`), 0o600))
		}, `phase "Half"`},
		{"another card's", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte(`{"version":1,"phase":"PrepareCompleted","card":"0000:83:00.0","from":2,"to":4}`), 0o600))
		}, `is of card "0000:83:00.0"`},
		{"too large", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, make([]byte, maxLayoutRecord+1), 0o600))
		}, "at most 4096"},
		{"a link", func(t *testing.T, path string) {
			other := filepath.Join(t.TempDir(), "rec.json")
			require.NoError(t, os.WriteFile(other, []byte(`{"version":1,"phase":"PrepareCompleted","card":"0000:03:00.0","from":2,"to":4}`), 0o600))
			require.NoError(t, os.Symlink(other, path))
		}, fdio.ErrNotRegular.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDynFixture(t, fakehost.P800SRIOV())
			path := filepath.Join(f.stateDir, layoutPrefix+card0+".json")
			tc.write(t, path)
			n := len(f.k.Writes())
			_, err := prepareOne(t, f.d, claim("q", "xpu-0-q0"))
			require.ErrorIs(t, err, ErrLayoutUnfinished)
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, f.k.Writes()[n:])
			require.Empty(t, f.d.Prepared())
			_, err = prepareOne(t, f.d, claim("h", "xpu-1-h0"))
			require.NoError(t, err)
		})
	}
}
