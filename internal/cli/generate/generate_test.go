package generate_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/validate"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// gen runs `xpu-cdi generate args... --dev-root root --driver-root root`.
func gen(t *testing.T, root string, args ...string) (string, string, error) {
	t.Helper()
	return clitest.Run(t, generate.NewCommand, append(append([]string{"generate"}, args...), clitest.Roots(root)...)...)
}

func TestGenerateWritesAValidSpec(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800x8())
	out := filepath.Join(t.TempDir(), "new", "dir", "baidu.com-xpu.json")
	_, _, err := gen(t, root, "--no-hooks", "--output", out)
	require.NoError(t, err)
	st, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm(), "specs must be readable by rootless engines")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(data, []byte("{")), "format from the .json extension")
	require.NoError(t, cdispec.ValidateFile(out))
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")

	stdout, _, err := clitest.Run(t, validate.NewCommand, "validate", out)
	require.NoError(t, err)
	require.Contains(t, stdout, "OK ")
}

func TestGenerateWarnsAboutAMissingHook(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800x8())
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	missing := filepath.Join(t.TempDir(), "xpu-runtime-hook")
	_, logs, err := gen(t, root, "--hook-path", missing, "--output", out)
	require.NoError(t, err)
	require.Contains(t, logs, "names the hook "+missing+", which does not exist")
	stdout, _, err := clitest.Run(t, validate.NewCommand, "validate", out)
	require.Error(t, err)
	require.Contains(t, stdout, "hook "+missing)
}

func TestGenerateStdout(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.K200())
	stdout, logs, err := gen(t, root, "--device-name-strategy", "index,bdf")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(stdout, "---\ncdiVersion: \"0.5.0\"\nkind: baidu.com/xpu\n"), stdout)
	require.Contains(t, logs, "is shared by 2 devices")
}

// TestGenerateSettings: the flags and their environment variables reach
// the spec.
func TestGenerateSettings(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800x8())
	t.Setenv("XPU_CDI_CLASS", "acc")
	stdout, _, err := gen(t, root, "--vendor", "example.com", "--device-name-strategy", "index", "--no-all-device", "--nodes-only", "--format", "json")
	require.NoError(t, err)
	spec, err := cdispec.Parse([]byte(stdout))
	require.NoError(t, err)
	require.Equal(t, "example.com/acc", spec.Kind)
	var names []string
	for _, d := range spec.Devices {
		names = append(names, d.Name)
	}
	require.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7"}, names)
	require.Empty(t, spec.ContainerEdits.Hooks, "nodes only: no libraries, no hook")
}

// TestBadInput checks that every failure names what was wrong and leaves an
// existing spec untouched.
func TestBadInput(t *testing.T) {
	good := clitest.FakeHost(t, fakehost.P800x8())
	noCtrl := fakehost.P800x8()
	noCtrl.NoCtrl = true
	noCtrlRoot := clitest.FakeHost(t, noCtrl)
	noNodes := fakehost.P800x8()
	noNodes.NoNodes = true
	noNodesRoot := clitest.FakeHost(t, noNodes)
	empty := t.TempDir()
	aFile := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(aFile, []byte("x"), 0o644))

	for _, tc := range []struct {
		description string
		root        string
		args        func(out string) []string
		wantErr     string
	}{
		{"no XPU at all", empty, func(o string) []string { return []string{"-o", o} }, "no Kunlun XPU found under " + empty},
		{"module loaded, no nodes", noNodesRoot, func(o string) []string { return []string{"-o", o} }, "no Kunlun XPU found under " + noNodesRoot},
		{"no control node", noCtrlRoot, func(o string) []string { return []string{"-o", o} }, "/dev/xpuctrl not found"},
		{"output is a directory", good, func(string) []string { return []string{"-o", empty} }, "--output " + empty + " is a directory"},
		{"output is a directory named like a spec", good, func(string) []string {
			d := filepath.Join(empty, "spec.yaml")
			require.NoError(t, os.MkdirAll(d, 0o755))
			return []string{"-o", d}
		}, "spec.yaml is a directory"},
		{"unwritable output dir", good, func(string) []string { return []string{"-o", filepath.Join(aFile, "spec.yaml")} }, aFile},
		{"extension runtimes ignore", good, func(o string) []string { return []string{"-o", o + ".yml"} }, "only read files ending in .yaml or .json"},
		{"format and extension disagree", good, func(o string) []string { return []string{"-o", o, "--format", "json"} }, "does not end in .json"},
		{"bad format", good, func(string) []string { return []string{"--format", "toml"} }, `--format: unknown spec format "toml"`},
		{"bad vendor", good, func(o string) []string { return []string{"-o", o, "--vendor", "-x"} }, `--vendor/--class: vendor "-x"`},
		{"bad class", good, func(o string) []string { return []string{"-o", o, "--class", "a/b"} }, `class "a/b"`},
		{"bad name strategy", good, func(o string) []string { return []string{"-o", o, "--device-name-strategy", "uuid"} }, `--device-name-strategy: unknown device name strategy "uuid"`},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "baidu.com-xpu.yaml")
			const old = "old content, must survive\n"
			require.NoError(t, os.WriteFile(out, []byte(old), 0o600))
			_, _, err := gen(t, tc.root, tc.args(out)...)
			require.ErrorContains(t, err, tc.wantErr)
			data, rerr := os.ReadFile(out)
			require.NoError(t, rerr)
			require.Equal(t, old, string(data), "the existing file must be untouched")
			entries, _ := os.ReadDir(dir)
			require.Len(t, entries, 1, "nothing else may be written")
		})
	}
	_, _, err := gen(t, empty)
	require.ErrorIs(t, err, discover.ErrNoDevices, "the user-facing error wraps the sentinel")
}

// TestGenerateXRE5 generates the spec of a healthy P800 (driver and XRE 5)
// host: no warning.
func TestGenerateXRE5(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800XRE5())
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	_, logs, err := gen(t, root, "--no-hooks", "--output", out)
	require.NoError(t, err)
	require.NotContains(t, logs, "level=warning", "a healthy 5.x host gives no warning")
	require.NoError(t, cdispec.ValidateFile(out))
}

// TestXRE5BrokenDriverFiles generates specs for P800 hosts whose driver
// files are broken: one warning naming the file, exit status 0, a complete
// valid spec with everything else (written atomically, nothing else in the
// directory).
func TestXRE5BrokenDriverFiles(t *testing.T) {
	for _, tc := range []struct {
		description string
		tweak       func(t *testing.T, tree *fakehost.Tree)
		warning     string
		mounts      []string // container paths of the library mounts still there
	}{
		{
			description: "a dangling link in so/",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				require.NoError(t, os.Symlink("libbkcl.so.5", tree.Path(tree.XREDir+"/so/libbkcl.so")))
			},
			warning: "driver library link /usr/local/xpu/so/libbkcl.so under driver root %ROOT% is dangling",
			mounts:  []string{"/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1", "/usr/local/xpu/so/libcuda.so.1", "/usr/local/xpu/so/libxpurt.so.2"},
		},
		{
			description: "a library without a SONAME",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				data, err := os.ReadFile(tree.Path(tree.XREDir + "/bin/xpu-smi")) // ELF, no DT_SONAME
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(tree.Path(tree.XREDir+"/so/libxft.so"), data, 0o755))
			},
			warning: "driver library /usr/local/xpu/so/libxft.so under driver root %ROOT% is not a usable shared library",
			mounts:  []string{"/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1", "/usr/local/xpu/so/libcuda.so.1", "/usr/local/xpu/so/libxpurt.so.2"},
		},
		{
			description: "the /usr/local/xpu link points nowhere",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				require.NoError(t, os.RemoveAll(tree.Path(tree.XREDir)))
			},
			warning: "XRE link /usr/local/xpu under driver root %ROOT% points to /usr/local/xpu-5.0.21.47, which does not exist",
			mounts:  []string{"/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1"},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := clitest.FakeTree(t, fakehost.P800XRE5())
			tc.tweak(t, tree)
			dir := t.TempDir()
			out := filepath.Join(dir, "baidu.com-xpu.yaml")
			_, logs, err := gen(t, tree.Root, "--no-hooks", "--output", out)
			require.NoError(t, err, "warnings do not change the exit status")
			warning := strings.ReplaceAll(tc.warning, "%ROOT%", tree.Root)
			require.Equal(t, 1, strings.Count(logs, warning), logs)
			require.NoError(t, cdispec.ValidateFile(out))
			data, err := os.ReadFile(out)
			require.NoError(t, err)
			for _, m := range tc.mounts {
				require.Contains(t, string(data), "containerPath: "+m+"\n")
			}
			require.Equal(t, 17, strings.Count(string(data), "type: c\n"), "8 devices, the all device (8 nodes) and xpuctrl")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "nothing half-written left behind")
		})
	}
}
