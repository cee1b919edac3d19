package nodeinstall

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// staticHook is xpu-runtime-hook built as the image ships it.
var staticHook string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nodeinstall")
	if err != nil {
		panic(err)
	}
	staticHook = filepath.Join(dir, HookName)
	cmd := exec.Command("go", "build", "-trimpath", "-o", staticHook, "github.com/xpu-cdi/xpu-cdi/cmd/xpu-runtime-hook")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		panic("building the static hook: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// hostTree is a fake Kunlun host with the layout of a real one where it
// matters here: /var/run is an absolute symlink to /run.
func hostTree(t *testing.T, h fakehost.Host) *fakehost.Tree {
	t.Helper()
	tree := fakehosttest.Build(t, h)
	require.NoError(t, os.MkdirAll(tree.Path("/run"), 0o755))
	require.NoError(t, os.MkdirAll(tree.Path("/var"), 0o755))
	require.NoError(t, os.Symlink("/run", tree.Path("/var/run")))
	// As on a host, no directory is writable by its group or by others,
	// whatever the umask the tests run under: install refuses such ones.
	require.NoError(t, filepath.WalkDir(tree.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(p, info.Mode().Perm()&^0o022)
	}))
	return tree
}

func newInstaller(t *testing.T, tree *fakehost.Tree, log *logtest.Recorder, mods ...func(*Config)) *Installer {
	t.Helper()
	cfg := Config{
		HostRoot:   tree.Root,
		HookSource: staticHook,
		Interval:   50 * time.Millisecond,
		Log:        log,
		// The tree's stater stands for the device nodes where the test
		// cannot mknod; the paths are the tree's as with a real host root.
		Discover: func(string) (*discover.Host, error) { return discover.Discover(tree.DiscoverOptions()...) },
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	in, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = in.Close() })
	return in
}

// files lists the tree below root (path and type), for before/after checks.
func files(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, strings.TrimPrefix(p, root)+" "+info.Mode().Type().String())
		return nil
	}))
	sort.Strings(out)
	return out
}

func readSpec(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

func TestInstallWritesHookAndSpec(t *testing.T) {
	for _, shape := range []fakehost.Host{fakehost.P800x8(), fakehost.P800XRE5()} {
		t.Run(shape.Shape, func(t *testing.T) {
			tree := hostTree(t, shape)
			before := files(t, tree.Root)
			log := &logtest.Recorder{}
			in := newInstaller(t, tree, log)

			wrote, err := in.InstallHook()
			require.NoError(t, err)
			require.True(t, wrote)
			hook := tree.Path("/opt/xpu-cdi/bin/xpu-runtime-hook")
			st, err := os.Stat(hook)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o755), st.Mode().Perm())
			want, err := os.ReadFile(staticHook)
			require.NoError(t, err)
			got, err := os.ReadFile(hook)
			require.NoError(t, err)
			require.Equal(t, want, got)
			wrote, err = in.InstallHook()
			require.NoError(t, err)
			require.False(t, wrote, "an equal hook is left alone")

			state, err := in.SyncSpec()
			require.NoError(t, err)
			require.Equal(t, SpecWritten, state)
			// The spec directory every engine reads.
			specFile := tree.Path("/etc/cdi/baidu.com-xpu.yaml")
			spec, err := cdispec.Parse([]byte(readSpec(t, specFile)))
			require.NoError(t, err)
			require.NotContains(t, readSpec(t, specFile), tree.Root, "host paths as the host sees them")
			require.Equal(t, "/opt/xpu-cdi/bin/xpu-runtime-hook", spec.ContainerEdits.Hooks[0].Path)
			require.Equal(t, "/dev/xpuctrl", spec.ContainerEdits.DeviceNodes[0].HostPath)
			for _, m := range spec.ContainerEdits.Mounts {
				require.FileExists(t, tree.Path(m.HostPath))
			}
			require.NoError(t, cdispec.ValidateFile(specFile))

			state, err = in.SyncSpec()
			require.NoError(t, err)
			require.Equal(t, SpecUnchanged, state)

			require.NoError(t, in.Uninstall())
			require.Equal(t, before, files(t, tree.Root), "uninstall leaves the host as it was")
		})
	}
}

func TestInstallFollowsTheDriver(t *testing.T) {
	tree := hostTree(t, fakehost.P800x8())
	log := &logtest.Recorder{}
	in := newInstaller(t, tree, log)
	specFile := tree.Path("/etc/cdi/baidu.com-xpu.yaml")

	// The driver is not loaded yet: no /dev/xpuN.
	require.NoError(t, os.Rename(tree.Path("/dev"), tree.Path("/dev.off")))
	require.NoError(t, os.Mkdir(tree.Path("/dev"), 0o755))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	require.Eventually(t, func() bool { return log.Has("waiting for the Kunlun driver on this node: no Kunlun XPU found") }, 5*time.Second, 10*time.Millisecond, log.String())
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, 1, log.Count("waiting for the Kunlun driver"), "said once, not at every poll")
	require.NoFileExists(t, specFile)
	require.FileExists(t, tree.Path("/opt/xpu-cdi/bin/xpu-runtime-hook"), "the hook is installed meanwhile")

	// The driver loads.
	require.NoError(t, os.Remove(tree.Path("/dev")))
	require.NoError(t, os.Rename(tree.Path("/dev.off"), tree.Path("/dev")))
	require.Eventually(t, func() bool { _, err := os.Stat(specFile); return err == nil }, 5*time.Second, 10*time.Millisecond, log.String())
	require.Eventually(t, func() bool { return log.Has("the Kunlun driver is loaded: 8 XPU(s)") }, 5*time.Second, 10*time.Millisecond, log.String())
	require.Contains(t, readSpec(t, specFile), "name: \"7\"")

	// A device goes away: the spec follows.
	require.NoError(t, os.Remove(tree.Path("/dev/xpu7")))
	testutil.Eventually(t, func(t testing.TB) bool { return !strings.Contains(readSpec(t, specFile), "name: \"7\"") }, 5*time.Second, 10*time.Millisecond)

	// Someone removes the hook: it is put back.
	require.NoError(t, os.Remove(tree.Path("/opt/xpu-cdi/bin/xpu-runtime-hook")))
	require.Eventually(t, func() bool {
		_, err := os.Stat(tree.Path("/opt/xpu-cdi/bin/xpu-runtime-hook"))
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)

	// The driver is unloaded: the spec goes (engines must not see devices that are gone).
	require.NoError(t, os.Remove(tree.Path("/dev/xpuctrl")))
	require.Eventually(t, func() bool { _, err := os.Stat(specFile); return os.IsNotExist(err) }, 5*time.Second, 10*time.Millisecond, log.String())
	require.Eventually(t, func() bool { return log.Has("removed the CDI spec /etc/cdi/baidu.com-xpu.yaml") }, 5*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

// TestUpgradeKeepsRunningHooks: a new hook replaces the file by rename; a
// hook that is running (an open file) keeps the old content, and no
// temporary file is left.
func TestUpgradeKeepsRunningHooks(t *testing.T) {
	tree := hostTree(t, fakehost.P800x8())
	in := newInstaller(t, tree, &logtest.Recorder{})
	_, err := in.InstallHook()
	require.NoError(t, err)
	hook := tree.Path("/opt/xpu-cdi/bin/xpu-runtime-hook")
	running, err := os.Open(hook)
	require.NoError(t, err)
	defer running.Close()
	oldSt, err := running.Stat()
	require.NoError(t, err)

	// The next version: the same ELF with a trailing byte.
	data, err := os.ReadFile(staticHook)
	require.NoError(t, err)
	next := filepath.Join(t.TempDir(), HookName)
	require.NoError(t, os.WriteFile(next, append(data, 0), 0o755))
	up := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) { c.HookSource = next })
	wrote, err := up.InstallHook()
	require.NoError(t, err)
	require.True(t, wrote)

	newSt, err := os.Stat(hook)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)+1), newSt.Size())
	require.NotEqual(t, oldSt.Sys().(*syscall.Stat_t).Ino, newSt.Sys().(*syscall.Stat_t).Ino, "replaced by rename, not rewritten in place")
	kept, err := os.ReadFile("/proc/self/fd/" + strconv.Itoa(int(running.Fd())))
	require.NoError(t, err)
	require.Equal(t, data, kept, "the running copy is the old file, whole")
	entries, err := os.ReadDir(tree.Path("/opt/xpu-cdi/bin"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{createdMarker, HookName}, names, "no temporary file left")
}

func TestInstallRefuses(t *testing.T) {
	t.Run("hook dir is a symlink", func(t *testing.T) {
		tree := hostTree(t, fakehost.P800x8())
		require.NoError(t, os.MkdirAll(tree.Path("/usr/local/bin"), 0o755))
		require.NoError(t, os.MkdirAll(tree.Path("/opt"), 0o755))
		require.NoError(t, os.Symlink("/usr/local/bin", tree.Path("/opt/hooks")))
		before := files(t, tree.Root)
		in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) { c.HookDir = "/opt/hooks" })
		_, err := in.InstallHook()
		require.ErrorContains(t, err, "hook directory /opt/hooks (through "+tree.Path("/opt/hooks")+") is a symlink (to /usr/local/bin)")
		require.Error(t, in.Run(context.Background()), "Run stops before writing a spec")
		require.Equal(t, before, files(t, tree.Root), "nothing written anywhere")
	})
	t.Run("hook dir is a file", func(t *testing.T) {
		tree := hostTree(t, fakehost.P800x8())
		require.NoError(t, os.WriteFile(tree.Path("/hookfile"), nil, 0o644))
		in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) { c.HookDir = "/hookfile" })
		_, err := in.InstallHook()
		require.ErrorContains(t, err, "is not a directory")
	})
	t.Run("dynamically linked hook", func(t *testing.T) {
		tree := hostTree(t, fakehost.P800x8())
		before := files(t, tree.Root)
		dynamic, err := exec.LookPath("true")
		require.NoError(t, err)
		in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) { c.HookSource = dynamic })
		_, err = in.InstallHook()
		require.ErrorContains(t, err, "is dynamically linked: it runs on the host, install the static build")
		require.Equal(t, before, files(t, tree.Root))
	})
	t.Run("hook dir not writable", func(t *testing.T) {
		testreq.Root(t, "a read-only bind mount")
		tree := hostTree(t, fakehost.P800x8())
		ro := tree.Path("/opt/ro")
		require.NoError(t, os.MkdirAll(ro, 0o755))
		require.NoError(t, unix.Mount(ro, ro, "", unix.MS_BIND, ""))
		t.Cleanup(func() { _ = unix.Unmount(ro, unix.MNT_DETACH) })
		require.NoError(t, unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""))
		before := files(t, tree.Root)
		in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) { c.HookDir = "/opt/ro" })
		err := in.Run(context.Background())
		require.ErrorContains(t, err, "hook directory /opt/ro (through "+ro+") is not writable")
		require.ErrorContains(t, err, "read-only file system")
		require.Equal(t, before, files(t, tree.Root), "nothing written anywhere: no spec, no marker")
	})
	t.Run("bad paths", func(t *testing.T) {
		tree := hostTree(t, fakehost.P800x8())
		for _, tc := range []struct {
			cfg Config
			err string
		}{
			{Config{HostRoot: tree.Root, HookDir: "opt/bin"}, `hook directory "opt/bin": give a clean absolute path`},
			{Config{HostRoot: tree.Root, HookDir: "/opt/../bin"}, `hook directory "/opt/../bin"`},
			{Config{HostRoot: tree.Root, SpecPath: "/var/run/cdi/xpu.toml"}, "CDI runtimes only read files ending in .yaml or .json"},
			{Config{HostRoot: tree.Path("/missing")}, "host root " + tree.Path("/missing")},
		} {
			_, err := New(tc.cfg)
			require.ErrorContains(t, err, tc.err)
		}
	})
}

func TestUninstallLeavesOthers(t *testing.T) {
	tree := hostTree(t, fakehost.P800x8())
	// The hook directory existed, with someone else's file, and a spec of
	// another kind sits where the spec would be.
	require.NoError(t, os.MkdirAll(tree.Path("/opt/bin"), 0o755))
	require.NoError(t, os.WriteFile(tree.Path("/opt/bin/other"), []byte("x"), 0o755))
	in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) { c.HookDir = "/opt/bin" })
	_, err := in.InstallHook()
	require.NoError(t, err)
	_, err = in.SyncSpec()
	require.NoError(t, err)
	require.NoError(t, in.Uninstall())
	require.NoFileExists(t, tree.Path("/opt/bin/xpu-runtime-hook"))
	require.FileExists(t, tree.Path("/opt/bin/other"))
	require.NoFileExists(t, tree.Path("/opt/bin/"+createdMarker), "the directory was not created by install")

	foreign := "cdiVersion: 0.6.0\nkind: example.com/npu\ndevices:\n- name: \"0\"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/null\n"
	require.NoError(t, os.MkdirAll(tree.Path("/etc/cdi"), 0o755))
	require.NoError(t, os.WriteFile(tree.Path("/etc/cdi/baidu.com-xpu.yaml"), []byte(foreign), 0o644))
	log := &logtest.Recorder{}
	in = newInstaller(t, tree, log, func(c *Config) { c.HookDir = "/opt/bin" })
	require.NoError(t, in.Uninstall())
	require.Equal(t, foreign, readSpec(t, tree.Path("/etc/cdi/baidu.com-xpu.yaml")))
	require.True(t, log.Has("is not a baidu.com/xpu spec; left in place"))
}

func TestInstallLabels(t *testing.T) {
	const file = "/etc/kubernetes/node-feature-discovery/features.d/xpu-cdi"
	tree := hostTree(t, fakehost.P800x8())
	s := sharing.Config{Replicas: 2, ResourceName: "baidu.com/xpu"}

	// Without NFD's directory nothing is created for it.
	log := &logtest.Recorder{}
	in := newInstaller(t, tree, log, func(c *Config) { c.LabelsFile, c.Sharing = file, &s })
	_, err := in.InstallHook()
	require.NoError(t, err)
	_, err = in.SyncSpec()
	require.NoError(t, err)
	require.NoDirExists(t, tree.Path("/etc/kubernetes"))
	require.True(t, log.Has("Node Feature Discovery not installed?"))

	require.NoError(t, os.MkdirAll(tree.Path(path.Dir(file)), 0o755))
	_, err = in.SyncSpec()
	require.NoError(t, err)
	data, err := os.ReadFile(tree.Path(file))
	require.NoError(t, err)
	require.Contains(t, string(data), "baidu.com/xpu.present=true\nbaidu.com/xpu.count=8\n")
	require.Contains(t, string(data), "baidu.com/xpu.sharing-strategy=time-slicing\nbaidu.com/xpu.replicas=2\n")

	require.NoError(t, os.Remove(tree.Path("/dev/xpuctrl")))
	state, err := in.SyncSpec()
	require.NoError(t, err)
	require.Equal(t, SpecWaiting, state)
	require.NoFileExists(t, tree.Path(file), "no usable XPU: no labels")

	_, err = New(Config{HostRoot: tree.Root, LabelsFile: "/etc/kubernetes/node-feature-discovery/features.d/.xpu"})
	require.ErrorContains(t, err, "NFD ignores files whose name starts with a dot")
}

func TestRunWarnsAboutTheHostPackage(t *testing.T) {
	tree := hostTree(t, fakehost.P800x8())
	require.NoError(t, os.MkdirAll(tree.Path("/usr/bin"), 0o755))
	require.NoError(t, os.WriteFile(tree.Path("/usr/bin/xpu-cdi"), []byte("x"), 0o755))
	log := &logtest.Recorder{}
	in := newInstaller(t, tree, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	require.Eventually(t, func() bool { return log.Has("this node has the xpu-cdi host package (/usr/bin/xpu-cdi)") }, 5*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	require.NoError(t, os.Remove(tree.Path("/usr/bin/xpu-cdi")))
	log = &logtest.Recorder{}
	in = newInstaller(t, tree, log)
	_, err := in.InstallHook()
	require.NoError(t, err)
	in.warnHostPackage()
	require.False(t, log.Has("host package"), log.String())
}

// TestSpecPassUnderTheLayoutLock: with LockSpec, the host is read for the
// spec only once the lock is held, and the spec written before it is let
// go, so that a pass never reads a card half cut by whoever holds it; a
// lock that cannot be had leaves the spec as it was, saying why.
func TestSpecPassUnderTheLayoutLock(t *testing.T) {
	tree := hostTree(t, fakehost.P800x8())
	specFile := tree.Path("/etc/cdi/baidu.com-xpu.yaml")
	var events []string
	held := false
	in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) {
		c.Discover = func(string) (*discover.Host, error) {
			events = append(events, fmt.Sprintf("discover (lock held: %v)", held))
			return discover.Discover(tree.DiscoverOptions()...)
		}
		c.LockSpec = func(context.Context) (func(), error) {
			held = true
			events = append(events, "lock")
			return func() {
				_, err := os.Stat(specFile)
				events = append(events, fmt.Sprintf("unlock (spec written: %v)", err == nil))
				held = false
			}, nil
		}
	})
	_, err := in.InstallHook()
	require.NoError(t, err)
	state, err := in.Sync(context.Background())
	require.NoError(t, err)
	require.Equal(t, SpecWritten, state)
	require.Equal(t, []string{"lock", "discover (lock held: true)", "unlock (spec written: true)"}, events)

	// The lock is held elsewhere past the wait: nothing is read or written.
	require.NoError(t, os.Remove(specFile))
	events = nil
	in = newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) {
		c.Discover = func(string) (*discover.Host, error) {
			events = append(events, "discover")
			return discover.Discover(tree.DiscoverOptions()...)
		}
		c.LockSpec = func(context.Context) (func(), error) {
			return nil, errors.New("the layout lock is held")
		}
	})
	state, err = in.Sync(context.Background())
	require.ErrorContains(t, err, "is left as it is until the next pass: the layout lock is held")
	require.Equal(t, SpecUnchanged, state)
	require.Empty(t, events)
	require.NoFileExists(t, specFile)
}
