package labels

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	app := &cli.App{Name: "xpu-cdi", Commands: []*cli.Command{NewCommand(log)}, Writer: &stdout, ErrWriter: io.Discard}
	err := app.Run(append([]string{"xpu-cdi", "labels"}, args...))
	return stdout.String(), logs.String(), err
}

// realTree is a fake host whose device nodes are real (mknod): the command
// reads it as it reads a host.
func realTree(t *testing.T, h fakehost.Host) string {
	t.Helper()
	testreq.Root(t, "the fake host's device nodes are made with mknod")
	tree := fakehosttest.Build(t, h)
	require.True(t, tree.RealNodes)
	return tree.Root
}

const p800Labels = `baidu.com/xpu.present=true
baidu.com/xpu.count=8
baidu.com/xpu.model=P800
baidu.com/xpu.family=Kunlun3
baidu.com/xpu.driver-version=5.0.21.21
baidu.com/xpu.xre-version=5.0.21.21
baidu.com/xpu.memory=98304
`

func TestLabelsPrintAndWrite(t *testing.T) {
	root := realTree(t, fakehost.P800x8())
	roots := []string{"--dev-root", root, "--driver-root", root}
	out, _, err := run(t, roots...)
	require.NoError(t, err)
	require.Equal(t, p800Labels, out)

	out, _, err = run(t, append(roots, "--replicas", "4")...)
	require.NoError(t, err)
	require.Equal(t, p800Labels+"baidu.com/xpu.sharing-strategy=time-slicing\nbaidu.com/xpu.replicas=4\n", out)

	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\n"), 0o644))
	out, _, err = run(t, append(roots, "--config-file", cfg)...)
	require.NoError(t, err)
	require.Equal(t, p800Labels+"baidu.com/xpu.sharing-strategy=none\nbaidu.com/xpu.replicas=1\n", out)

	dir := t.TempDir()
	file := filepath.Join(dir, "xpu-cdi")
	_, logs, err := run(t, append(roots, "--output", file)...)
	require.NoError(t, err)
	require.Contains(t, logs, "wrote 7 node label(s) to "+file)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "# Written by xpu-cdi labels: node labels of the Kunlun XPUs, read by Node Feature Discovery's local source.\n"+p800Labels, string(data))

	// The driver goes away: the labels go too.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "dev")))
	out, logs, err = run(t, roots...)
	require.NoError(t, err)
	require.Empty(t, out)
	require.Contains(t, logs, "no labels: no Kunlun XPU found")
	_, logs, err = run(t, append(roots, "--output", file)...)
	require.NoError(t, err)
	require.Contains(t, logs, "removed "+file+": the host has no XPU")
	require.NoFileExists(t, file)
}

func TestLabelsBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: 0}\n"), 0o644))
	for _, tc := range []struct {
		description string
		args        []string
		err         string
	}{
		{"bad config", []string{"--config-file", cfg}, "--config-file: sharing configuration " + cfg + ": sharing.timeSlicing.resources[0].replicas: line 5: 0 replicas"},
		{"both", []string{"--config-file", cfg, "--replicas", "2"}, "--replicas and --config-file"},
		{"zero replicas", []string{"--replicas", "0"}, "--replicas: 0 replicas"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			require.ErrorContains(t, err, tc.err)
		})
	}

	root := realTree(t, fakehost.P800x8())
	_, _, err := run(t, "--dev-root", root, "--driver-root", root, "--output", filepath.Join(dir, "no-nfd", "xpu-cdi"))
	require.ErrorContains(t, err, "is Node Feature Discovery installed?")
	require.NoDirExists(t, filepath.Join(dir, "no-nfd"))
	_, logs, err := run(t, "--dev-root", root, "--driver-root", root, "--output", filepath.Join(dir, "no-nfd", "xpu-cdi"), "--skip-missing-dir")
	require.NoError(t, err, "the refresh unit's case: no NFD, nothing to do")
	require.Contains(t, logs, "Node Feature Discovery is not set up on this host")
	require.NoDirExists(t, filepath.Join(dir, "no-nfd"))
}

// TestLabelsHostRoot: --host-root reads the host below it, as generate and
// partition do, and is refused with --dev-root or --driver-root.
func TestLabelsHostRoot(t *testing.T) {
	root := realTree(t, fakehost.P800x8())
	out, _, err := run(t, "--host-root", root)
	require.NoError(t, err)
	require.Equal(t, p800Labels, out)
	_, _, err = run(t, "--host-root", root, "--driver-root", root)
	require.ErrorContains(t, err, "--host-root "+root+" and --driver-root both say where the host is")
}
