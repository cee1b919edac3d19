package dra

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// testClock is the fixed time of the taints in the golden files.
var testClock = func() time.Time { return time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC) }

func discoverTree(tree *fakehost.Tree) DiscoverFunc {
	return func() (*discover.Host, error) { return discover.Discover(tree.DiscoverOptions()...) }
}

// fixture is a driver on a fake host with its node spec written.
type fixture struct {
	tree     *fakehost.Tree
	specDir  string
	stateDir string
	log      *logtest.Recorder
	d        *Driver
}

func newFixture(t testing.TB, h fakehost.Host, mods ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{tree: fakehosttest.Build(t, h), specDir: t.TempDir(), stateDir: filepath.Join(t.TempDir(), "claims"), log: &logtest.Recorder{}}
	fakehosttest.WriteSpec(t, f.tree, f.specDir)
	f.d = f.driver(t, mods...)
	return f
}

// forEachShape runs f, in a subtest named after the shape, on a fixture
// of every fake host shape but the benchmarks' scaled one, refreshed once.
func forEachShape(t *testing.T, f func(t *testing.T, shape string, fx *fixture)) {
	for _, shape := range fakehost.Shapes() {
		if shape == fakehost.ShapeScaled {
			continue
		}
		t.Run(shape, func(t *testing.T) {
			h, err := fakehost.ShapeByName(shape, 0, 0)
			require.NoError(t, err)
			fx := newFixture(t, h)
			require.True(t, fx.d.Refresh())
			f(t, shape, fx)
		})
	}
}

// driver returns a new driver on the fixture's host, spec and state: a
// restarted driver.
func (f *fixture) driver(t testing.TB, mods ...func(*Config)) *Driver {
	t.Helper()
	cfg := Config{
		NodeName: "node-1", Discover: discoverTree(f.tree), SpecDirs: []string{f.specDir},
		StateDir: f.stateDir, Clock: testClock, Log: f.log, PollInterval: 20 * time.Millisecond,
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	d, err := New(cfg)
	require.NoError(t, err)
	return d
}

// setState writes the procfs state of device n.
func (f *fixture) setState(t testing.TB, n int, state string) {
	t.Helper()
	require.NoError(t, os.WriteFile(f.tree.Path(filepath.Join("/proc/xpu", "dev"+strconv.Itoa(n), "state")), []byte(state+"\n"), 0o644))
}

type xpuHost = discover.Host

func discoverRoot(root string) (*discover.Host, error) {
	return discover.Discover(discover.WithDevRoot(root), discover.WithDriverRoot(root))
}
