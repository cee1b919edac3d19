package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// run runs the xpu-cdi app in-process and returns stdout, the log output
// and the error main would print.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	app := newApp(log)
	app.Writer = &stdout
	app.ErrWriter = io.Discard
	err := app.Run(append([]string{"xpu-cdi"}, args...))
	return stdout.String(), logs.String(), err
}

// requireRoot skips tests that need real device nodes.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: the fake host's device nodes are made with mknod")
	}
}

func fakeHost(t *testing.T, h fakehost.Host) string {
	t.Helper()
	requireRoot(t)
	tree := fakehosttest.Build(t, h)
	require.True(t, tree.RealNodes || h.NoNodes)
	return tree.Root
}

func roots(root string) []string {
	return []string{"--dev-root", root, "--driver-root", root}
}

func TestGenerateWritesAValidSpec(t *testing.T) {
	root := fakeHost(t, fakehost.P800x8())
	out := filepath.Join(t.TempDir(), "new", "dir", "baidu.com-xpu.json")
	_, _, err := run(t, append([]string{"generate", "--no-hooks", "--output", out}, roots(root)...)...)
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

	stdout, _, err := run(t, "validate", out)
	require.NoError(t, err)
	require.Contains(t, stdout, "OK ")
}

func TestGenerateWarnsAboutAMissingHook(t *testing.T) {
	root := fakeHost(t, fakehost.P800x8())
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	missing := filepath.Join(t.TempDir(), "xpu-runtime-hook")
	_, logs, err := run(t, append([]string{"generate", "--hook-path", missing, "--output", out}, roots(root)...)...)
	require.NoError(t, err)
	require.Contains(t, logs, "names the hook "+missing+", which does not exist")
	stdout, _, err := run(t, "validate", out)
	require.Error(t, err)
	require.Contains(t, stdout, "hook "+missing)
}

func TestGenerateStdout(t *testing.T) {
	root := fakeHost(t, fakehost.K200())
	stdout, logs, err := run(t, append([]string{"generate", "--device-name-strategy", "index,bdf"}, roots(root)...)...)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(stdout, "---\ncdiVersion: \"0.5.0\"\nkind: baidu.com/xpu\n"), stdout)
	require.Contains(t, logs, "is shared by 2 devices")
}

// TestBadInput checks that every failure names what was wrong and leaves an
// existing spec untouched.
func TestBadInput(t *testing.T) {
	requireRoot(t)
	good := fakeHost(t, fakehost.P800x8())
	noCtrl := fakehost.P800x8()
	noCtrl.NoCtrl = true
	noCtrlRoot := fakeHost(t, noCtrl)
	noNodes := fakehost.P800x8()
	noNodes.NoNodes = true
	noNodesRoot := fakeHost(t, noNodes)
	empty := t.TempDir()
	aFile := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(aFile, []byte("x"), 0o644))

	for _, tc := range []struct {
		description string
		args        func(out string) []string
		wantErr     string
	}{
		{"no XPU at all", func(o string) []string { return append([]string{"generate", "-o", o}, roots(empty)...) }, "no Kunlun XPU found under " + empty},
		{"module loaded, no nodes", func(o string) []string { return append([]string{"generate", "-o", o}, roots(noNodesRoot)...) }, "no Kunlun XPU found under " + noNodesRoot},
		{"no control node", func(o string) []string { return append([]string{"generate", "-o", o}, roots(noCtrlRoot)...) }, "/dev/xpuctrl not found"},
		{"output is a directory", func(string) []string { return append([]string{"generate", "-o", empty}, roots(good)...) }, "--output " + empty + " is a directory"},
		{"output is a directory named like a spec", func(o string) []string {
			d := filepath.Join(empty, "spec.yaml")
			require.NoError(t, os.MkdirAll(d, 0o755))
			return append([]string{"generate", "-o", d}, roots(good)...)
		}, "spec.yaml is a directory"},
		{"unwritable output dir", func(string) []string {
			return append([]string{"generate", "-o", filepath.Join(aFile, "spec.yaml")}, roots(good)...)
		}, aFile},
		{"extension runtimes ignore", func(o string) []string { return append([]string{"generate", "-o", o + ".yml"}, roots(good)...) }, "only read files ending in .yaml or .json"},
		{"format and extension disagree", func(o string) []string {
			return append([]string{"generate", "-o", o, "--format", "json"}, roots(good)...)
		}, "does not end in .json"},
		{"bad format", func(string) []string { return append([]string{"generate", "--format", "toml"}, roots(good)...) }, `unknown spec format "toml"`},
		{"bad vendor", func(o string) []string {
			return append([]string{"generate", "-o", o, "--vendor", "-x"}, roots(good)...)
		}, `vendor "-x"`},
		{"bad class", func(o string) []string {
			return append([]string{"generate", "-o", o, "--class", "a/b"}, roots(good)...)
		}, `class "a/b"`},
		{"bad name strategy", func(o string) []string {
			return append([]string{"generate", "-o", o, "--device-name-strategy", "uuid"}, roots(good)...)
		}, `unknown device name strategy "uuid"`},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "baidu.com-xpu.yaml")
			const old = "old content, must survive\n"
			require.NoError(t, os.WriteFile(out, []byte(old), 0o600))
			_, _, err := run(t, tc.args(out)...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.wantErr)
			data, rerr := os.ReadFile(out)
			require.NoError(t, rerr)
			require.Equal(t, old, string(data), "the existing file must be untouched")
			entries, _ := os.ReadDir(dir)
			require.Len(t, entries, 1, "nothing else may be written")
		})
	}
}

// TestErrorsPrintTheirHint checks what main prints: the error on one line
// and, for a host without XPUs, the hint on the next.
func TestErrorsPrintTheirHint(t *testing.T) {
	empty := t.TempDir()
	_, _, err := run(t, append([]string{"generate"}, roots(empty)...)...)
	require.ErrorIs(t, err, discover.ErrNoDevices)
	var out bytes.Buffer
	printError(&out, err)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2, out.String())
	require.True(t, strings.HasPrefix(lines[0], "xpu-cdi: no Kunlun XPU found under "+empty), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "hint: is the kunlun kernel module loaded"), lines[1])

	out.Reset()
	_, _, err = run(t, "generate", "--format", "toml")
	require.Error(t, err)
	printError(&out, err)
	require.Equal(t, "xpu-cdi: --format: unknown spec format \"toml\" (valid: yaml, json)\n", out.String())
}

func TestValidateReportsStaleSpec(t *testing.T) {
	requireRoot(t)
	cache := fakehosttest.CacheDir(t)
	root := filepath.Join(t.TempDir(), "host")
	_, err := fakehost.Build(root, fakehost.P800x8(), fakehost.WithCacheDir(cache))
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	_, _, err = run(t, append([]string{"generate", "-o", out}, roots(root)...)...)
	require.NoError(t, err)

	// The driver is reloaded and gets another major.
	require.NoError(t, os.RemoveAll(root))
	reloaded := fakehost.P800x8()
	reloaded.Major = 250
	_, err = fakehost.Build(root, reloaded, fakehost.WithCacheDir(cache))
	require.NoError(t, err)

	stdout, _, err := run(t, "validate", out)
	require.Error(t, err)
	require.Contains(t, stdout, "is 250:0 on this host but the spec says 243:0")
	require.Contains(t, stdout, "fix: regenerate it with: xpu-cdi generate --output "+out)
}

func TestValidateRejectsBrokenSpec(t *testing.T) {
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	require.NoError(t, os.WriteFile(out, []byte("cdiVersion: \"0.5.0\"\nkind: baidu.com/xpu\ndevices: []\nunknownField: 1\n"), 0o644))
	stdout, _, err := run(t, "validate", out)
	require.Error(t, err)
	require.Contains(t, stdout, "FAIL "+out)
}

func TestRefreshRemovesOwnSpecWhenXPUsAreGone(t *testing.T) {
	root := fakeHost(t, fakehost.P800x8())
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	_, _, err := run(t, append([]string{"refresh", "-o", out}, roots(root)...)...)
	require.NoError(t, err)
	require.FileExists(t, out)

	_, logs, err := run(t, append([]string{"refresh", "-o", out}, roots(t.TempDir())...)...)
	require.NoError(t, err, "no XPU must not fail the boot")
	require.NoFileExists(t, out)
	require.Contains(t, logs, "removed "+out)
	require.Contains(t, logs, "no Kunlun XPU found")
	require.NotContains(t, logs, "hint", "the hint is for a user at a terminal, not the unit's log")

	foreign := filepath.Join(t.TempDir(), "other.yaml")
	require.NoError(t, os.WriteFile(foreign, []byte("cdiVersion: \"0.5.0\"\nkind: example.com/gpu\ndevices: []\n"), 0o644))
	_, _, err = run(t, append([]string{"refresh", "-o", foreign}, roots(t.TempDir())...)...)
	require.NoError(t, err)
	require.FileExists(t, foreign, "a spec of another kind is never removed")
}

func TestList(t *testing.T) {
	root := fakeHost(t, fakehost.R200SRIOV())
	dir := t.TempDir()
	_, _, err := run(t, append([]string{"generate", "-o", filepath.Join(dir, "x.yaml"), "--vendor", "list.xpu-cdi.test"}, roots(root)...)...)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("kind: [\n"), 0o644))
	stdout, logs, err := run(t, "list", "--spec-dir", dir)
	require.NoError(t, err)
	require.Contains(t, stdout, "list.xpu-cdi.test/xpu=1\n")
	require.Contains(t, stdout, "list.xpu-cdi.test/xpu=all\n")
	require.NotContains(t, stdout, "list.xpu-cdi.test/xpu=0\n", "the PF with VFs is not offered")
	require.Contains(t, logs, "broken.yaml")
}

func TestInfoJSON(t *testing.T) {
	root := fakeHost(t, fakehost.Degraded())
	stdout, _, err := run(t, append([]string{"info", "--json"}, roots(root)...)...)
	require.NoError(t, err)
	require.Contains(t, stdout, `"index": 3`)
	require.Contains(t, stdout, `"state": "ERROR"`)
	require.Contains(t, stdout, `"model": "unknown"`)
	require.Contains(t, stdout, `xpu-smi not found`)
	text, _, err := run(t, append([]string{"info"}, roots(root)...)...)
	require.NoError(t, err)
	require.Contains(t, text, "Problems:")
}

func TestVersion(t *testing.T) {
	stdout, _, err := run(t, "--version")
	require.NoError(t, err)
	require.Contains(t, stdout, "commit")
}

// TestHelpSaysEachDefaultOnce renders the help of every command: urfave/cli
// appends "(default: ...)" itself, so a usage text that says it too prints
// it twice.
func TestHelpSaysEachDefaultOnce(t *testing.T) {
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			path := append(slices.Clone(prefix), c.Name)
			if len(c.Subcommands) > 0 {
				walk(path, c.Subcommands)
				continue
			}
			t.Run(strings.Join(path, " "), func(t *testing.T) {
				out, _, err := run(t, append(path, "--help")...)
				require.NoError(t, err)
				require.Contains(t, out, "--help")
				for _, line := range strings.Split(out, "\n") {
					require.LessOrEqual(t, strings.Count(line, "(default:"), 1, "line %q", line)
				}
			})
		}
	}
	walk(nil, newApp(logrus.New()).Commands)
}

// TestXRE5InfoAndGenerate runs info and generate on the P800 (driver and
// XRE 5) host: no warning, one note per host-wide fact, every problem
// printed once (info prints them; it does not log them as well).
func TestXRE5InfoAndGenerate(t *testing.T) {
	root := fakeHost(t, fakehost.P800XRE5())
	text, logs, err := run(t, append([]string{"info"}, roots(root)...)...)
	require.NoError(t, err)
	require.Empty(t, logs, "info prints what it found; it logs nothing")
	require.Contains(t, text, "XRE: /usr/local/xpu -> /usr/local/xpu-5.0.21.47\n")
	require.Contains(t, text, "Control node: /dev/xpuctrl 195:255 ")
	require.NotContains(t, text, "Problems:")
	require.NotContains(t, text, "does not seem to be loaded")
	for _, line := range []string{
		"/proc/xpu not present",
		"/sys/class/xpu not present",
		"no PCI address for /dev/xpu0../dev/xpu7",
		"runtime library: /usr/local/xpu/so/libxpurt.so.2",
		"library /lib/x86_64-linux-gnu/libxpunvidia-ml.so.1 <- " + root + "/lib/x86_64-linux-gnu/libxpunvidia-ml.so.5.0.21.47",
		"library /usr/local/xpu/so/libcuda.so.1 <- ",
	} {
		require.Equal(t, 1, strings.Count(text, line), "%q once in\n%s", line, text)
	}

	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	_, logs, err = run(t, append([]string{"generate", "--no-hooks", "--output", out}, roots(root)...)...)
	require.NoError(t, err)
	require.NotContains(t, logs, "level=warning", "a healthy 5.x host gives no warning")
	require.NoError(t, cdispec.ValidateFile(out))
}

// TestInfoPrintsProblemsOnce checks that a host's warnings appear once,
// under Problems, and not also on the log.
func TestInfoPrintsProblemsOnce(t *testing.T) {
	root := fakeHost(t, fakehost.Degraded())
	text, logs, err := run(t, append([]string{"info"}, roots(root)...)...)
	require.NoError(t, err)
	require.NotContains(t, logs, "xpu-smi not found")
	require.Equal(t, 1, strings.Count(text, "xpu-smi not found"), text)
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
			requireRoot(t)
			tree := fakehosttest.Build(t, fakehost.P800XRE5())
			tc.tweak(t, tree)
			dir := t.TempDir()
			out := filepath.Join(dir, "baidu.com-xpu.yaml")
			_, logs, err := run(t, append([]string{"generate", "--no-hooks", "--output", out}, roots(tree.Root)...)...)
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

// TestGenerateHostRoot: read through --host-root, the spec names every host
// path as the host sees it: the same spec as generated on the host itself,
// each host path without the root.
func TestGenerateHostRoot(t *testing.T) {
	for _, shape := range []fakehost.Host{fakehost.P800x8(), fakehost.P800XRE5()} {
		t.Run(shape.Shape, func(t *testing.T) {
			root := fakeHost(t, shape)
			viaRoot, _, err := run(t, "generate", "--format", "json", "--host-root", root)
			require.NoError(t, err)
			onHost, _, err := run(t, append([]string{"generate", "--format", "json"}, roots(root)...)...)
			require.NoError(t, err)
			require.NotContains(t, viaRoot, root, "no host path names the root it was read through")
			require.Equal(t, strings.ReplaceAll(onHost, `"`+root+`/`, `"/`), viaRoot)
			spec, err := cdispec.Parse([]byte(viaRoot))
			require.NoError(t, err)
			require.Contains(t, viaRoot, `"hostPath": "/dev/xpu0"`)
			require.NotEmpty(t, spec.ContainerEdits.Mounts)
			for _, m := range spec.ContainerEdits.Mounts {
				_, err := os.Stat(filepath.Join(root, m.HostPath))
				require.NoError(t, err, "host path %s exists below the root", m.HostPath)
			}
		})
	}
	root := fakeHost(t, fakehost.P800x8())
	_, _, err := run(t, "generate", "--host-root", root, "--dev-root", root)
	require.ErrorContains(t, err, "--host-root "+root+" and --dev-root both say where the host is")
	_, _, err = run(t, "generate", "--host-root", filepath.Join(root, "missing"))
	require.ErrorContains(t, err, "--host-root "+filepath.Join(root, "missing"))
}
