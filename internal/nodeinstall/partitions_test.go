package nodeinstall

import (
	"context"
	"errors"
	"os"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/labels"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// fakeCards stands for the kernel under the installer: Apply records the
// layouts it is given and sets the first card's VF count, which every
// discovery then reports.
type fakeCards struct {
	numVFs  int
	applied []string
	refuse  error
}

func (f *fakeCards) apply(_ context.Context, l partition.Layout) error {
	if f.refuse != nil {
		return f.refuse
	}
	f.applied = append(f.applied, l.String())
	f.numVFs = l[len(l)-1].VFs
	return nil
}

func (f *fakeCards) discover(tree *fakehost.Tree) func(string) (*discover.Host, error) {
	return func(string) (*discover.Host, error) {
		h, err := discover.Discover(tree.DiscoverOptions()...)
		if err == nil {
			h.Devices[0].PCI.NumVFs = f.numVFs
		}
		return h, err
	}
}

func TestInstallKeepsThePartitionLayout(t *testing.T) {
	const file = "/etc/kubernetes/node-feature-discovery/features.d/xpu-cdi"
	tree := hostTree(t, fakehost.P800SRIOV())
	require.NoError(t, os.MkdirAll(tree.Path(path.Dir(file)), 0o755))
	cards := &fakeCards{numVFs: 2}
	label := ""
	var labelErr error
	chart, err := partition.ParseLayout("all=4")
	require.NoError(t, err)
	log := &logtest.Recorder{}
	in := newInstaller(t, tree, log, func(c *Config) {
		c.LabelsFile = file
		c.Discover = cards.discover(tree)
		c.Partitions = &Partitions{
			Layout: chart,
			NodeLabels: func(context.Context) (map[string]string, error) {
				return map[string]string{labels.PartitionLayoutRequest: label, "x": "y"}, labelErr
			},
			LabelInterval: time.Nanosecond, // read at every pass
			Apply:         cards.apply,
		}
	})
	_, err = in.InstallHook()
	require.NoError(t, err)
	sync := func() {
		t.Helper()
		state, err := in.Sync(context.Background())
		require.NoError(t, err)
		require.NotEqual(t, SpecWaiting, state)
	}

	// The installer's layout, once: the cards keep it.
	sync()
	sync()
	require.Equal(t, []string{"all=4"}, cards.applied)
	require.True(t, log.Has("the cards are laid out as all=4 (the installer's layout)"))
	data, err := os.ReadFile(tree.Path(file))
	require.NoError(t, err)
	require.NotContains(t, string(data), "partition-layout", "the node label is the admin's here")

	// Someone re-lays-out a card: put back.
	cards.numVFs = 2
	sync()
	require.Equal(t, []string{"all=4", "all=4"}, cards.applied)

	// The node label wins over the installer's layout, in its label form.
	label = "all-2_0000.03.00.0-4"
	sync()
	sync()
	require.Equal(t, []string{"all=4", "all=4", "all=2,0000:03:00.0=4"}, cards.applied)

	// A label that is no layout: an error naming it, nothing applied, the
	// spec still kept.
	label = "all=2"
	_, err = in.Sync(context.Background())
	require.ErrorContains(t, err, "node label node-restriction.kubernetes.io/baidu.com-xpu.partition-layout=all=2")
	require.Len(t, cards.applied, 3)
	require.FileExists(t, tree.Path("/etc/cdi/baidu.com-xpu.yaml"))

	// The label cannot be read: nothing applied.
	label, labelErr = "", errors.New("forbidden")
	_, err = in.Sync(context.Background())
	require.ErrorContains(t, err, "forbidden")
	require.Len(t, cards.applied, 3)

	// Label gone: back to the installer's layout. A refusal (a card in
	// use) is an error and is tried again at the next pass.
	labelErr = nil
	cards.refuse = errors.New("card 0 (0000:03:00.0) is in use by pod ml/train")
	_, err = in.Sync(context.Background())
	require.ErrorContains(t, err, "laying the cards out as all=4 (the installer's layout): card 0 (0000:03:00.0) is in use by pod ml/train")
	cards.refuse = nil
	sync()
	require.Equal(t, []string{"all=4", "all=4", "all=2,0000:03:00.0=4", "all=4"}, cards.applied)
}

// TestInstallReadsTheLabelEveryInterval: between two reads of the node
// label the last value stands; a failed read is tried again at once.
func TestInstallReadsTheLabelEveryInterval(t *testing.T) {
	tree := hostTree(t, fakehost.P800SRIOV())
	cards := &fakeCards{numVFs: 2}
	reads := 0
	var readErr error
	in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) {
		c.Discover = cards.discover(tree)
		c.Partitions = &Partitions{
			NodeLabels: func(context.Context) (map[string]string, error) {
				reads++
				return map[string]string{labels.PartitionLayoutRequest: "all-4"}, readErr
			},
			Apply: cards.apply,
		}
	})
	_, err := in.InstallHook()
	require.NoError(t, err)
	for range 3 {
		_, err := in.Sync(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, 1, reads, "one read per %s", DefaultLabelInterval)
	require.Equal(t, []string{"all=4"}, cards.applied)

	in.labelAt = time.Now().Add(-DefaultLabelInterval)
	readErr = errors.New("timeout")
	_, err = in.Sync(context.Background())
	require.ErrorContains(t, err, "timeout")
	readErr = nil
	_, err = in.Sync(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, reads, "a failed read is not kept")
}

// The layout request label is under node-restriction.kubernetes.io/, which
// a node's kubelet cannot set on its own Node. The old name is read for one
// more release, with a warning (once per value); the new one wins when both
// are set.
func TestInstallReadsTheOldLabelWithAWarning(t *testing.T) {
	tree := hostTree(t, fakehost.P800SRIOV())
	cards := &fakeCards{numVFs: 2}
	node := map[string]string{}
	log := &logtest.Recorder{}
	in := newInstaller(t, tree, log, func(c *Config) {
		c.Discover = cards.discover(tree)
		c.Partitions = &Partitions{
			NodeLabels:    func(context.Context) (map[string]string, error) { return node, nil },
			LabelInterval: time.Nanosecond,
			Apply:         cards.apply,
		}
	})
	_, err := in.InstallHook()
	require.NoError(t, err)
	sync := func() {
		t.Helper()
		_, err := in.Sync(context.Background())
		require.NoError(t, err)
	}

	node[labels.PartitionLayout] = "all-4"
	sync()
	sync()
	require.Equal(t, []string{"all=4"}, cards.applied)
	require.True(t, log.Has("the cards are laid out as all=4 (node label baidu.com/xpu.partition-layout=all-4)"))
	require.Equal(t, 1, log.Count("the node label baidu.com/xpu.partition-layout=all-4 asks for a layout under its old name"), log.Warnings())
	require.Contains(t, log.Warnings(), "label the node node-restriction.kubernetes.io/baidu.com-xpu.partition-layout=all-4 instead")

	// Both: the new one wins, and the old one is not warned about.
	node[labels.PartitionLayoutRequest] = "all-2"
	node[labels.PartitionLayout] = "all-0"
	sync()
	require.Equal(t, []string{"all=4", "all=2"}, cards.applied)
	require.True(t, log.Has("(node label node-restriction.kubernetes.io/baidu.com-xpu.partition-layout=all-2)"))
	require.Zero(t, log.Count("baidu.com/xpu.partition-layout=all-0"))
}

func TestInstallWithoutPartitions(t *testing.T) {
	const file = "/etc/kubernetes/node-feature-discovery/features.d/xpu-cdi"
	tree := hostTree(t, fakehost.P800SRIOV())
	require.NoError(t, os.MkdirAll(tree.Path(path.Dir(file)), 0o755))
	in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) { c.LabelsFile = file })
	_, err := in.InstallHook()
	require.NoError(t, err)
	_, err = in.Sync(context.Background())
	require.NoError(t, err)
	data, err := os.ReadFile(tree.Path(file))
	require.NoError(t, err)
	require.Contains(t, string(data), "baidu.com/xpu.partition-layout=", "without partitions the installer publishes the current layout")

	_, err = New(Config{HostRoot: tree.Root, Partitions: &Partitions{}})
	require.ErrorIs(t, err, errNoApply)
}

// The node label may name a layout of the installer's file of named
// layouts (name.NAME) instead of giving one; a name the file does not
// have, a name that is not one, or no file is an error naming the label,
// and nothing is applied.
func TestInstallLabelNamesALayout(t *testing.T) {
	tree := hostTree(t, fakehost.P800SRIOV())
	cards := &fakeCards{numVFs: 2}
	file, err := partition.ParseConfig([]byte("[whole]\nall=0\n[quarters]\nall=4\n[mixed]\nall=2\n0000:03:00.0=4\n"))
	require.NoError(t, err)
	label := ""
	log := &logtest.Recorder{}
	parts := &Partitions{
		Layouts:     file,
		LayoutsFile: "/etc/xpu-cdi-partitions/layouts.conf",
		NodeLabels: func(context.Context) (map[string]string, error) {
			return map[string]string{labels.PartitionLayoutRequest: label}, nil
		},
		LabelInterval: time.Nanosecond,
		Apply:         cards.apply,
	}
	in := newInstaller(t, tree, log, func(c *Config) {
		c.Discover = cards.discover(tree)
		c.Partitions = parts
	})
	_, err = in.InstallHook()
	require.NoError(t, err)

	label = "name.quarters"
	_, err = in.Sync(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"all=4"}, cards.applied)
	require.True(t, log.Has("the cards are laid out as all=4 (node label node-restriction.kubernetes.io/baidu.com-xpu.partition-layout=name.quarters, layout [quarters] of /etc/xpu-cdi-partitions/layouts.conf)"))

	label = "name.mixed"
	_, err = in.Sync(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"all=4", "all=2,0000:03:00.0=4"}, cards.applied)

	// The layout form still reads as a layout.
	label = "all-2"
	_, err = in.Sync(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"all=4", "all=2,0000:03:00.0=4", "all=2"}, cards.applied)

	for _, tc := range []struct{ label, want string }{
		{"name.halves", `node label node-restriction.kubernetes.io/baidu.com-xpu.partition-layout=name.halves: /etc/xpu-cdi-partitions/layouts.conf: no layout named "halves" in the file (it has whole, quarters, mixed); the cards are left as they are`},
		{"name.", `label value "name." names a layout (name.NAME): layout name "": 1 to 63 characters`},
		{"name._x", `layout name "_x": letters, digits`},
	} {
		label = tc.label
		_, err = in.Sync(context.Background())
		require.ErrorContains(t, err, tc.want, tc.label)
		require.Len(t, cards.applied, 3, tc.label)
	}

	// No file of named layouts: the name is an error, not a layout.
	in.o.Partitions.Layouts = nil
	label = "name.quarters"
	_, err = in.Sync(context.Background())
	require.ErrorContains(t, err, "node label node-restriction.kubernetes.io/baidu.com-xpu.partition-layout=name.quarters names a layout, but the installer has no named layouts")
	require.Len(t, cards.applied, 3)
}
