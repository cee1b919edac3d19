package validate_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/validate"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio/fdiotest"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return clitest.Run(t, validate.NewCommand, append([]string{"validate"}, args...)...)
}

// generateSpec writes the spec of the fake host at root to out with
// `xpu-cdi generate`, with extra flags.
func generateSpec(t *testing.T, root, out string, extra ...string) {
	t.Helper()
	args := append(append([]string{"generate", "-o", out}, extra...), clitest.Roots(root)...)
	_, _, err := clitest.Run(t, generate.NewCommand, args...)
	require.NoError(t, err)
}

func TestValidateReportsStaleSpec(t *testing.T) {
	tree := clitest.FakeTree(t, fakehost.P800x8())
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	generateSpec(t, tree.Root, out, "--no-hooks")
	stdout, _, err := run(t, out)
	require.NoError(t, err)
	require.Contains(t, stdout, "OK   "+out+" (kind baidu.com/xpu, ")

	// The driver is reloaded and gets another major.
	require.NoError(t, os.RemoveAll(tree.Root))
	reloaded := fakehost.P800x8()
	reloaded.Major = 250
	_, err = fakehost.Build(tree.Root, reloaded, fakehost.WithCacheDir(fakehosttest.CacheDir(t)))
	require.NoError(t, err)

	stdout, _, err = run(t, out)
	require.ErrorIs(t, err, validate.ErrInvalid)
	require.ErrorContains(t, err, "1 of 1 spec(s) failed")
	require.Contains(t, stdout, "is 250:0 on this host but the spec says 243:0")
	require.Contains(t, stdout, "fix: regenerate it with: xpu-cdi generate --output "+out)
}

func TestValidateRejectsBrokenSpec(t *testing.T) {
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	require.NoError(t, os.WriteFile(out, []byte("cdiVersion: \"0.5.0\"\nkind: baidu.com/xpu\ndevices: []\nunknownField: 1\n"), 0o644))
	stdout, _, err := run(t, out)
	require.ErrorIs(t, err, validate.ErrInvalid)
	require.Contains(t, stdout, "FAIL "+out)

	missing := filepath.Join(t.TempDir(), "absent.yaml")
	stdout, _, err = run(t, missing)
	require.ErrorIs(t, err, validate.ErrInvalid)
	require.Contains(t, stdout, "FAIL "+missing)
}

// TestValidateSearchesTheSpecDirs: without FILE, every spec of the kind in
// the directories is checked, and a spec of another kind is not.
func TestValidateSearchesTheSpecDirs(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800x8())
	etc, run2 := t.TempDir(), t.TempDir()
	mine := filepath.Join(etc, "baidu.com-xpu.yaml")
	generateSpec(t, root, mine, "--no-hooks")
	other := filepath.Join(run2, "example.com-acc.json")
	generateSpec(t, root, other, "--no-hooks", "--vendor", "example.com", "--class", "acc")

	stdout, _, err := run(t, "--spec-dir", etc, "--spec-dir", run2)
	require.NoError(t, err)
	require.Contains(t, stdout, "OK   "+mine)
	require.NotContains(t, stdout, other)

	stdout, _, err = run(t, "--spec-dir", etc, "--spec-dir", run2, "--vendor", "example.com", "--class", "acc")
	require.NoError(t, err)
	require.Contains(t, stdout, "OK   "+other)
	require.NotContains(t, stdout, mine)

	empty := t.TempDir()
	_, _, err = run(t, "--spec-dir", empty)
	require.ErrorContains(t, err, "no baidu.com/xpu spec found in ["+empty+"]; create one with: xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml")
}

func TestValidateReadsTheFilesTheLibraryReads(t *testing.T) {
	// The files and order of cdicompat.SpecFiles: directories in the order
	// given, names sorted within one (".json" and ".yaml" together), no
	// directory however it is named, no other extension.
	root := clitest.FakeHost(t, fakehost.P800x8())
	first, second := t.TempDir(), t.TempDir()
	var want []string
	for _, p := range []string{filepath.Join(first, "a.json"), filepath.Join(first, "b.yaml"), filepath.Join(second, "a.yaml")} {
		generateSpec(t, root, p, "--no-hooks")
		want = append(want, p)
	}
	data, err := os.ReadFile(want[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(first, "a.yml"), data, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(first, "c.json"), 0o755))

	stdout, _, err := run(t, "--spec-dir", first, "--spec-dir", second)
	require.NoError(t, err)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		f := strings.Fields(line)
		require.Equal(t, "OK", f[0], line)
		got = append(got, f[1])
	}
	require.Equal(t, want, got)
}

// TestValidateHostileFiles: a FIFO or a link to /dev/zero, given as FILE or
// lying in a spec directory, is a FAIL (or no spec) at once, not a hang.
func TestValidateHostileFiles(t *testing.T) {
	for _, tc := range fdiotest.HostileFiles() {
		t.Run(tc.Description, func(t *testing.T) {
			dir := t.TempDir()
			bad := filepath.Join(dir, "baidu.com-xpu.yaml")
			require.NoError(t, tc.Plant(bad))
			type result struct {
				stdout          string
				errFile, errDir error
			}
			r := fdiotest.Within(t, "validate", func() result {
				var r result
				r.stdout, _, r.errFile = run(t, bad)
				_, _, r.errDir = run(t, "--spec-dir", dir)
				return r
			})
			require.ErrorIs(t, r.errFile, validate.ErrInvalid)
			require.Contains(t, r.stdout, "FAIL "+bad+": invalid CDI spec "+bad+": "+bad+": not a regular file")
			require.ErrorContains(t, r.errDir, "no baidu.com/xpu spec found")
		})
	}
}

// TestValidateWarnsOfShadowedSpecs: two specs of the kind in two spec
// directories both pass their own checks, and a WARN line says the earlier
// directory's is shadowed, naming the spec the engines use; another kind's
// shadows are not this validation's.
func TestValidateWarnsOfShadowedSpecs(t *testing.T) {
	tree := clitest.FakeTree(t, fakehost.P800x8())
	etc, run1 := t.TempDir(), t.TempDir()
	for _, dir := range []string{etc, run1} {
		generateSpec(t, tree.Root, filepath.Join(dir, "baidu.com-xpu.yaml"), "--no-hooks")
		generateSpec(t, tree.Root, filepath.Join(dir, "other.yaml"), "--no-hooks", "--vendor", "other.xpu-cdi.test")
	}
	stdout, _, err := run(t, "--spec-dir", etc, "--spec-dir", run1)
	require.NoError(t, err, "a shadowed spec is a warning: %s", stdout)
	require.Contains(t, stdout, "OK   "+filepath.Join(etc, "baidu.com-xpu.yaml"))
	require.Contains(t, stdout, "WARN "+filepath.Join(etc, "baidu.com-xpu.yaml")+" is shadowed by "+filepath.Join(run1, "baidu.com-xpu.yaml"))
	require.NotContains(t, stdout, "other.yaml is shadowed", "only the kind validated")

	stdout, _, err = run(t, "--spec-dir", run1)
	require.NoError(t, err)
	require.NotContains(t, stdout, "WARN")
}

// TestValidateHintKeepsFlags: the fix a failed check prints makes the spec
// again with the flags it was made with, and for a missing hook says how
// to do without it, keeping the other flags.
func TestValidateHintKeepsFlags(t *testing.T) {
	tree := clitest.FakeTree(t, fakehost.P800x8())
	dir := t.TempDir()
	hook := filepath.Join(dir, "missing", "xpu-runtime-hook")
	out := filepath.Join(dir, "example.com-acc.yaml")
	generateSpec(t, tree.Root, out, "--hook-path", hook, "--vendor", "example.com", "--class", "acc", "--device-name-strategy", "index", "--no-all-device")
	stdout, _, err := run(t, out)
	require.ErrorIs(t, err, validate.ErrInvalid)
	flags := " --vendor example.com --class acc --device-name-strategy index --no-all-device"
	require.Contains(t, stdout, "fix: regenerate it with: xpu-cdi generate --output "+out+flags+" --hook-path "+hook+" (or")
	require.Contains(t, stdout, "the hook "+hook+" is missing: install xpu-runtime-hook there, or give its path with --hook-path, or leave the hooks out: xpu-cdi generate --output "+out+flags+" --no-hooks\n")

	// A nodes-only spec whose driver was reloaded with another major.
	nodesOnly := filepath.Join(dir, "baidu.com-xpu.yaml")
	generateSpec(t, tree.Root, nodesOnly, "--nodes-only")
	require.NoError(t, os.RemoveAll(tree.Root))
	reloaded := fakehost.P800x8()
	reloaded.Major = 250
	_, err = fakehost.Build(tree.Root, reloaded, fakehost.WithCacheDir(fakehosttest.CacheDir(t)))
	require.NoError(t, err)
	stdout, _, err = run(t, nodesOnly)
	require.ErrorIs(t, err, validate.ErrInvalid)
	require.Contains(t, stdout, "fix: regenerate it with: xpu-cdi generate --output "+nodesOnly+" --nodes-only (or")
	require.NotContains(t, stdout, "is missing")
}

// TestValidateSummary: --summary follows the verdict with one row for the
// spec's own edits and one per device, whose counts and nodes are the
// spec's; without the flag, and for a file that does not parse, there is
// none.
func TestValidateSummary(t *testing.T) {
	tree := clitest.FakeTree(t, fakehost.P800x8())
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	generateSpec(t, tree.Root, out, "--no-hooks")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	spec, err := cdispec.Parse(data)
	require.NoError(t, err)

	stdout, _, err := run(t, "--summary", out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3+len(spec.Devices), stdout)
	require.True(t, strings.HasPrefix(lines[0], "OK   "+out), lines[0])
	require.Equal(t, []string{"DEVICE", "MOUNTS", "HOOKS", "ENV", "NODES"}, strings.Fields(lines[1]))
	row := func(name string, e *specs.ContainerEdits) []string {
		nodes := make([]string, 0, len(e.DeviceNodes))
		for _, n := range e.DeviceNodes {
			nodes = append(nodes, n.Path)
		}
		return []string{name, strconv.Itoa(len(e.Mounts)), strconv.Itoa(len(e.Hooks)), strconv.Itoa(len(e.Env)), strings.Join(nodes, ",")}
	}
	require.Equal(t, row("(spec-wide)", &spec.ContainerEdits), strings.Fields(lines[2]))
	wide := strings.Fields(lines[2])
	require.NotEqual(t, "0", wide[1], "the XRE's mounts")
	require.Equal(t, "/dev/xpuctrl", wide[4])
	for i := range spec.Devices {
		require.Equal(t, row(spec.Devices[i].Name, &spec.Devices[i].ContainerEdits), strings.Fields(lines[3+i]))
	}
	require.Equal(t, []string{"all", "0", "0", "8", "/dev/xpu0,/dev/xpu1,/dev/xpu2,/dev/xpu3,/dev/xpu4,/dev/xpu5,/dev/xpu6,/dev/xpu7"}, strings.Fields(lines[len(lines)-1]))

	stdout, _, err = run(t, out)
	require.NoError(t, err)
	require.NotContains(t, stdout, "DEVICE")

	broken := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	require.NoError(t, os.WriteFile(broken, []byte("cdiVersion: \"0.5.0\"\nkind: baidu.com/xpu\ndevices: []\nunknownField: 1\n"), 0o644))
	stdout, _, err = run(t, "--summary", broken)
	require.ErrorIs(t, err, validate.ErrInvalid)
	require.NotContains(t, stdout, "DEVICE")
}
