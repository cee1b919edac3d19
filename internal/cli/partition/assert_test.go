package partition

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

func TestAssert(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.R200SRIOV()) // card 0 in thirds, card 1 whole

	out, _, err := run(t, "assert", "--host-root", root, "--layout", "0=3,1=0")
	require.NoError(t, err)
	require.Equal(t, "the node matches the layout 0=3,1=0\n", out)

	_, _, err = run(t, "assert", "--host-root", root, "--layout", "all=2")
	require.EqualError(t, err, "the node does not match the layout all=2: card 0 (0000:3b:00.0) has 3 VFs, the layout wants 2; card 1 (0000:5e:00.0) has 0 VFs, the layout wants 2")
	require.Equal(t, 1, cmdflags.ExitStatus(err))

	_, _, err = run(t, "assert", "--host-root", root, "--layout", "1=3")
	require.EqualError(t, err, "the node does not match the layout 1=3: card 1 (0000:5e:00.0) has 0 VFs, the layout wants 3")

	for _, tc := range []struct {
		description string
		args        []string
		err         string
	}{
		{"a layout the board does not allow", []string{"--layout", "all=4"}, "4 VFs is not a layout of a R200"},
		{"an unknown card", []string{"--layout", "7=2"}, "7=2: no such card on this node"},
		{"a bad layout", []string{"--layout", "all=x"}, "--layout: layout entry"},
		{"no layout", nil, "no layout: give --layout"},
		{"--name without --config", []string{"--layout", "all=2", "--name", "halves"}, "--name halves names a layout of a --config file"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, _, err := run(t, append([]string{"assert", "--host-root", root}, tc.args...)...)
			require.ErrorContains(t, err, tc.err)
			require.Equal(t, 2, cmdflags.ExitStatus(err), "an assert that could not be made is status 2")
		})
	}

	_, _, err = run(t, "assert", "--host-root", t.TempDir(), "--layout", "all=2")
	require.Error(t, err)
	require.Equal(t, 2, cmdflags.ExitStatus(err), "a host without cards")

	conf := filepath.Join(t.TempDir(), "fleet.conf")
	require.NoError(t, os.WriteFile(conf, []byte("[thirds]\n0=3\n1=0\n[halves]\nall=2\n"), 0o644))
	out, _, err = run(t, "assert", "--host-root", root, "--config", conf, "--name", "thirds")
	require.NoError(t, err)
	require.Equal(t, "the node matches the layout 0=3,1=0\n", out)
	_, _, err = run(t, "assert", "--host-root", root, "--config", conf, "--name", "halves")
	require.ErrorContains(t, err, "does not match the layout all=2")
	_, _, err = run(t, "assert", "--host-root", root, "--config", conf)
	require.ErrorContains(t, err, "the file holds named layouts (thirds, halves): choose one with --name")
	_, _, err = run(t, "assert", "--host-root", root, "--config", conf, "--name", "quarters")
	require.ErrorContains(t, err, `no layout named "quarters" in the file (it has thirds, halves)`)

	require.NoError(t, os.WriteFile(conf, []byte("# nothing yet\n"), 0o644))
	out, _, err = run(t, "assert", "--host-root", root, "--config", conf)
	require.NoError(t, err)
	require.Contains(t, out, "holds no layout: nothing to check")
}

func TestExport(t *testing.T) {
	tree := clitest.FakeTree(t, fakehost.R200SRIOV())
	root := tree.Root

	out, _, err := run(t, "export", "--host-root", root)
	require.NoError(t, err)
	require.Equal(t, "0=3\n1=0\n", out)

	// What export prints, apply --config takes back: the node is unchanged.
	conf := filepath.Join(t.TempDir(), "partitions.conf")
	require.NoError(t, os.WriteFile(conf, []byte(out), 0o644))
	out, _, err = run(t, "assert", "--host-root", root, "--config", conf)
	require.NoError(t, err, out)

	out, _, err = run(t, "export", "--host-root", root, "--name", "node-17")
	require.NoError(t, err)
	require.Equal(t, "[node-17]\n0=3\n1=0\n", out)
	require.NoError(t, os.WriteFile(conf, []byte(out), 0o644))
	_, _, err = run(t, "assert", "--host-root", root, "--config", conf, "--name", "node-17")
	require.NoError(t, err)

	_, _, err = run(t, "export", "--host-root", root, "--name", "a b")
	require.ErrorContains(t, err, `--name: layout name "a b"`)
	_, _, err = run(t, "export", "--host-root", t.TempDir())
	require.Error(t, err)
}

func TestApplyNamedLayout(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.R200SRIOV())
	conf := filepath.Join(t.TempDir(), "fleet.conf")
	require.NoError(t, os.WriteFile(conf, []byte("[whole]\nall=0\n[halves]\nall=2\n"), 0o644))

	out, _, err := run(t, "apply", "--host-root", root, "--config", conf, "--name", "halves", "--dry-run")
	require.NoError(t, err)
	require.Contains(t, out, "layout: 0=3,1=0 -> all=2 (dry run: nothing written)\n")
	_, _, err = run(t, "apply", "--host-root", root, "--config", conf, "--dry-run")
	require.ErrorContains(t, err, "--config: "+conf+": the file holds named layouts (whole, halves): choose one with --name")
	t.Setenv("XPU_CDI_PARTITION_NAME", "whole")
	out, _, err = run(t, "apply", "--host-root", root, "--config", conf, "--dry-run")
	require.NoError(t, err, "the boot unit's way: the name from the environment")
	require.Contains(t, out, "layout: 0=3,1=0 -> all=0 (dry run: nothing written)\n")
}
