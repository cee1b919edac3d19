package deviceplugin

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin/kubelettest"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// fakeTree builds h; the nodes are real where the test runs as root, else
// the tree's node stater stands for them.
func fakeTree(t *testing.T, h fakehost.Host) *fakehost.Tree {
	t.Helper()
	return fakehosttest.Build(t, h)
}

func discoverTree(tree *fakehost.Tree) DiscoverFunc {
	return func() (*discover.Host, error) { return discover.Discover(tree.DiscoverOptions()...) }
}

// shortDir is a temporary directory with a path short enough for unix sockets.
func shortDir(t *testing.T) string { return testutil.ShortDir(t, "xdp") }

// newPlugin builds a plugin on tree with a spec of its devices in a
// temporary spec directory and fast intervals.
func newPlugin(t *testing.T, tree *fakehost.Tree, log *logtest.Recorder, mods ...func(*Config)) (*Plugin, string) {
	t.Helper()
	specDir := t.TempDir()
	fakehosttest.WriteSpec(t, tree, specDir)
	cfg := Config{
		Discover:       discoverTree(tree),
		SpecDirs:       []string{specDir},
		PluginDir:      shortDir(t),
		HealthInterval: 50 * time.Millisecond,
		WatchInterval:  20 * time.Millisecond,
		Log:            log,
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	p, err := New(cfg)
	require.NoError(t, err)
	return p, specDir
}

// running is a plugin served by Run, registered with a test kubelet.
type running struct {
	plugin  *Plugin
	kubelet *kubelettest.Kubelet
	reg     *kubelettest.Plugin
	cancel  context.CancelFunc
	done    chan error
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// start starts the test kubelet in p's directory, then p, and waits for
// the registration.
func start(t *testing.T, p *Plugin) *running {
	t.Helper()
	k, err := kubelettest.Start(p.o.PluginDir)
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	r := &running{plugin: p, kubelet: k, done: make(chan error, 1)}
	r.run(t)
	r.reg, err = k.WaitRegistration(ctxT(t))
	require.NoError(t, err)
	return r
}

func (r *running) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.plugin.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return 10 s after its context ended")
		}
	})
}

// health returns ID -> health of a device list.
func health(devs []*pluginapi.Device) map[string]string {
	out := map[string]string{}
	for _, d := range devs {
		out[d.GetID()] = d.GetHealth()
	}
	return out
}
