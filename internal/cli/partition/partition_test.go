package partition

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/install"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return clitest.Run(t, NewCommand, append([]string{"partition"}, args...)...)
}

func TestShow(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.R200SRIOV())
	out, _, err := run(t, "show", "--host-root", root)
	require.NoError(t, err)
	require.Contains(t, out, "CARD  ADDRESS       MODEL  VFS  ALLOWED  PARTITION      VF NODES        IN USE BY\n")
	require.Contains(t, out, "0     0000:3b:00.0  R200   3    0,1,2,3  3 x 5gb (1/3)  xpu2,xpu3,xpu4  -\n")
	require.Contains(t, out, "1     0000:5e:00.0  R200   0    0,1,2,3  whole (16gb)   -               -\n")
	require.Contains(t, out, "layout: 0=3,1=0\n")
	require.Contains(t, out, "handles: 5 used (every PF and every VF takes one; no public limit for this driver)\n")
	require.Contains(t, out, "note: no kubelet PodResources socket at "+filepath.Join(root, "/var/lib/kubelet/pod-resources/kubelet.sock"))

	// --require-pod-resources: the same missing socket is an error.
	_, _, err = run(t, "show", "--host-root", root, "--require-pod-resources")
	require.ErrorIs(t, err, partition.ErrNoPodResources)
	require.ErrorContains(t, err, filepath.Join(root, "/var/lib/kubelet/pod-resources/kubelet.sock"))
	_, _, err = run(t, "apply", "--host-root", root, "--layout", "all=2", "--dry-run", "--require-pod-resources")
	require.ErrorIs(t, err, partition.ErrNoPodResources)

	out, _, err = run(t, "show", "--dev-root", root, "--driver-root", root, "--pod-resources-socket", "", "--json")
	require.NoError(t, err)
	var s partition.Status
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Len(t, s.Cards, 2)
	require.Equal(t, 3, s.Cards[0].NumVFs)
	require.Equal(t, int64(5120), s.Cards[0].VFMemoryMiB)
	require.Empty(t, s.Notes)
}

func TestApplyCLI(t *testing.T) {
	tree := clitest.FakeTree(t, fakehost.R200SRIOV())
	root := tree.Root

	out, _, err := run(t, "apply", "--host-root", root, "--layout", "all=2", "--dry-run")
	require.NoError(t, err)
	require.Contains(t, out, "0     0000:3b:00.0  3           2       2      0,2     would change\n")
	require.Contains(t, out, "layout: 0=3,1=0 -> all=2 (dry run: nothing written)\n")

	_, _, err = run(t, "apply", "--host-root", root, "--layout", "all=4")
	require.ErrorContains(t, err, "layout all=4 refused, nothing changed")
	require.ErrorContains(t, err, "card 0 (0000:3b:00.0) (R200): 4 VFs is not a layout of a R200: allowed 0, 1, 2, 3")

	_, _, err = run(t, "apply", "--host-root", root)
	require.ErrorContains(t, err, "no layout: give --layout")
	_, _, err = run(t, "apply", "--host-root", root, "--layout", "all=x")
	require.ErrorContains(t, err, "--layout: layout entry")

	conf := filepath.Join(t.TempDir(), "partitions.conf")
	require.NoError(t, os.WriteFile(conf, []byte("# no layout yet\n"), 0o644))
	_, logs, err := run(t, "apply", "--host-root", root, "--config", conf)
	require.NoError(t, err)
	require.Contains(t, logs, "holds no layout: nothing to do")
	_, _, err = run(t, "apply", "--host-root", root, "--config", conf, "--layout", "all=1")
	require.ErrorContains(t, err, "both give the layout")

	require.NoError(t, os.WriteFile(conf, []byte("# the node's\n0=3\n1=0\n"), 0o644))
	out, _, err = run(t, "apply", "--host-root", root, "--config", conf, "--json")
	require.NoError(t, err)
	var rep sriov.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.False(t, rep.Changed(), "already laid out")
	require.Equal(t, "0=3,1=0", rep.Layout)

	// In use: a process holds a VF.
	require.NoError(t, os.MkdirAll(tree.Path("/proc/4242/fd"), 0o755))
	require.NoError(t, os.WriteFile(tree.Path("/proc/4242/comm"), []byte("python3\n"), 0o644))
	require.NoError(t, os.Symlink(tree.Path("/dev/xpu3"), tree.Path("/proc/4242/fd/5")))
	_, _, err = run(t, "apply", "--host-root", root, "--layout", "0=1", "--dry-run")
	require.ErrorContains(t, err, "card in use, nothing changed: card 0 (0000:3b:00.0) is held by pid 4242 (python3) holding /dev/xpu3 (--wait DURATION waits for the cards to be free)")
	out, _, err = run(t, "show", "--host-root", root)
	require.NoError(t, err)
	require.Contains(t, out, "pid 4242 (python3) holding /dev/xpu3")
}

// The override of an incomplete in-use scan is a flag of `partition
// apply` alone, with no environment variable: the installer (the node
// label's path) has no way to set it.
func TestIgnoreIncompleteScanIsApplyOnly(t *testing.T) {
	flagNamed := func(c *cli.Command) *cli.BoolFlag {
		for _, f := range c.Flags {
			if slices.Contains(f.Names(), "ignore-incomplete-scan") {
				return f.(*cli.BoolFlag)
			}
		}
		return nil
	}
	cmd := NewCommand(logrus.New())
	for _, sub := range cmd.Subcommands {
		f := flagNamed(sub)
		if sub.Name != "apply" {
			require.Nil(t, f, sub.Name)
			continue
		}
		require.NotNil(t, f)
		require.Empty(t, f.EnvVars, "an override is typed per run")
		require.False(t, f.Value, "not the default")
	}
	require.Nil(t, flagNamed(install.NewCommand(logrus.New())))
}

// The device plugin's sharing configuration: its renames count in the
// in-use check; a file the plugin would refuse is an error naming the flag.
func TestSharingConfigFile(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.R200SRIOV())
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: baidu.com/xpu\n        replicas: 2\n        rename: example.com/xpu-ts\n"), 0o644))
	_, _, err := run(t, "show", "--host-root", root, "--sharing-config-file", file)
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(file, []byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: baidu.com/xpu\n        replicas: 0\n"), 0o644))
	_, _, err = run(t, "show", "--host-root", root, "--sharing-config-file", file)
	require.ErrorContains(t, err, "--sharing-config-file (XPU_CDI_SHARING_CONFIG_FILE): sharing configuration "+file)
	_, _, err = run(t, "apply", "--host-root", root, "--layout", "all=1", "--dry-run", "--sharing-config-file", "/nonexistent/config.yaml")
	require.ErrorContains(t, err, "--sharing-config-file (XPU_CDI_SHARING_CONFIG_FILE): reading the sharing configuration: open /nonexistent/config.yaml")
}

// What apply prints, as golden files: a dry run shows each card's count
// before and after (and the writes it would make), cards that do not
// change as they are; a refusal shows the node's layout and handles now,
// not the refused layout's.
func TestApplyReportGolden(t *testing.T) {
	tree := clitest.FakeTree(t, fakehost.R200SRIOV()) // 0=3,1=0
	root := tree.Root
	for _, tc := range []struct {
		name, golden string
		args         []string
		held         bool
		wantErr      error
	}{
		{name: "dry run, one card changes", golden: "dry-run-change.txt", args: []string{"--layout", "0=2", "--dry-run"}},
		{name: "dry run, both cards change", golden: "dry-run-all.txt", args: []string{"--layout", "all=1", "--dry-run"}},
		{name: "dry run, nothing to change", golden: "dry-run-same.txt", args: []string{"--layout", "0=3", "--dry-run"}},
		{name: "refused by the plan", golden: "refused-plan.txt", args: []string{"--layout", "all=4"}},
		{name: "refused, in use", golden: "refused-in-use.txt", args: []string{"--layout", "0=1"}, held: true, wantErr: sriov.ErrInUse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.held {
				require.NoError(t, os.MkdirAll(tree.Path("/proc/4242/fd"), 0o755))
				require.NoError(t, os.WriteFile(tree.Path("/proc/4242/comm"), []byte("python3\n"), 0o644))
				require.NoError(t, os.Symlink(tree.Path("/dev/xpu3"), tree.Path("/proc/4242/fd/5")))
				defer func() { require.NoError(t, os.RemoveAll(tree.Path("/proc/4242"))) }()
			}
			out, _, err := run(t, append([]string{"apply", "--host-root", root, "--pod-resources-socket", ""}, tc.args...)...)
			switch {
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
			case strings.HasPrefix(tc.golden, "refused"):
				require.Error(t, err)
			default:
				require.NoError(t, err)
			}
			testutil.Golden(t, "apply/"+tc.golden, []byte(out))
		})
	}
}

// apply logs a line per write and per wait for the kernel; --quiet
// leaves them out. Without the fake kernel the VFs never come: the card
// is put back, with its own lines.
func TestApplyProgressLines(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		root := clitest.FakeHost(t, fakehost.R200SRIOV()) // 0=3,1=0
		args := []string{"apply", "--host-root", root, "--pod-resources-socket", "", "--layout", "0=1", "--settle", "300ms"}
		if quiet {
			args = append(args, "--quiet")
		}
		_, logs, err := run(t, args...)
		require.ErrorContains(t, err, "put back to 3 VFs")
		for _, line := range []string{
			`msg="card 0 (0000:3b:00.0): sriov_numvfs 3 -> 0"`,
			`msg="card 0 (0000:3b:00.0): waiting for the kernel and udev to show 0 VFs (at most 300ms)"`,
			`msg="card 0 (0000:3b:00.0): gave up waiting for 0 VFs after`,
			`msg="card 0 (0000:3b:00.0): sriov_numvfs 0 -> 3"`,
		} {
			if quiet {
				require.NotContains(t, logs, line)
			} else {
				require.Contains(t, logs, line)
			}
		}
		require.Contains(t, logs, "putting it back to 3 VFs", "a warning is not progress")
	}
}
