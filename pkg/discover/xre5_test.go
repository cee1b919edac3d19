package discover_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// libraryPaths maps the container path of each discovered library to its
// host path below root (root replaced by "").
func libraryPaths(h *discover.Host, root string) map[string]string {
	out := map[string]string{}
	for _, l := range h.Libraries {
		out[l.Path] = strings.TrimPrefix(l.HostPath, root)
	}
	return out
}

// countContaining counts the lines of lines that contain s.
func countContaining(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// TestXRE5Host discovers the P800 host of the reference's "Driver 5.x and
// P800" section: every library a container needs, one note per optional
// source the driver does not provide, no warning, no guessed PCI address.
func TestXRE5Host(t *testing.T) {
	tree := build(t, fakehost.P800XRE5())
	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	require.Empty(t, h.Warnings)

	require.NotNil(t, h.Control)
	require.Equal(t, [2]uint32{195, 255}, [2]uint32{h.Control.Major, h.Control.Minor})
	require.Len(t, h.Devices, 8)
	for _, d := range h.Devices {
		require.Equal(t, [2]uint32{195, uint32(d.Index)}, [2]uint32{d.Node.Major, d.Node.Minor})
		require.Empty(t, d.Address(), "no source maps /dev/xpu%d to a PCI function: nothing guessed", d.Index)
		require.Nil(t, d.PCI)
		require.Empty(t, d.Problems)
		require.True(t, d.Compute)
	}

	xre := "/usr/local/xpu-" + fakehost.XREVersionP800
	require.Equal(t, map[string]string{
		"/usr/local/xpu/so/libxpurt.so.2":            xre + "/so/libxpurt.so.2",
		"/usr/local/xpu/so/libxpuml.so.1":            xre + "/so/libxpuml.so.1",
		"/usr/local/xpu/so/libcuda.so.1":             xre + "/so/libcuda.so.1",
		"/usr/local/xpu/so/libcudart.so.12":          xre + "/so/libcudart.so.12",
		"/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1": "/lib/x86_64-linux-gnu/libxpunvidia-ml.so." + fakehost.XREVersionP800,
	}, libraryPaths(h, tree.Root))
	for _, l := range h.Libraries {
		switch l.Soname {
		case "libxpurt.so.2":
			require.Equal(t, []string{"libxpurt.so"}, l.Links)
		case "libcudart.so.12":
			require.Equal(t, []string{"libcudart.so"}, l.Links)
		case "libxpunvidia-ml.so.1":
			require.Equal(t, []string{"/lib/x86_64-linux-gnu/libxpunvidia-ml.so." + fakehost.XREVersionP800}, l.AlsoAt,
				"the versioned file the SONAME link names is mounted too")
		default:
			require.Empty(t, l.Links, l.Soname)
			require.Empty(t, l.AlsoAt, l.Soname)
		}
	}
	require.Len(t, h.Tools, 1)
	require.Equal(t, filepath.Join(tree.Root, xre, "bin", "xpu-smi"), h.Tools[0].HostPath)
	require.Equal(t, "/usr/local/xpu", h.XRELink)
	require.Equal(t, xre, h.XRETarget)

	// One line per host-wide fact, none per device.
	require.Equal(t, 1, countContaining(h.Notes, "proc/xpu not present"), h.Notes)
	require.Equal(t, 1, countContaining(h.Notes, "sys/class/xpu not present"), h.Notes)
	require.Equal(t, 1, countContaining(h.Notes, "no PCI address for /dev/xpu0../dev/xpu7"), h.Notes)
	require.Equal(t, 1, countContaining(h.Notes, "runtime library: /usr/local/xpu/so/libxpurt.so.2"), h.Notes)
	require.Len(t, h.Notes, 4, h.Notes)
}

// TestDriverLoaded checks each sign of a loaded driver on a host without
// /proc/xpu, and the one warning when there is none.
func TestDriverLoaded(t *testing.T) {
	for _, tc := range []struct {
		description string
		remove      []string
		devices     string // replaces /proc/devices when not empty
		loaded      string
	}{
		{description: "module directory", loaded: "sys/module/kunlun exists"},
		{description: "/proc/kunlun only", remove: []string{"sys/module"}, loaded: "proc/kunlun exists"},
		{description: "/proc/devices kunlun line", remove: []string{"sys/module", "proc/kunlun"}, devices: "Character devices:\n  1 mem\n195 kunlun\n", loaded: `"195 kunlun"`},
		{description: "/proc/devices xpu line", remove: []string{"sys/module", "proc/kunlun"}, loaded: `"195 xpu"`},
		{description: "no sign", remove: []string{"sys/module", "proc/kunlun", "proc/devices"}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := build(t, fakehost.P800XRE5())
			for _, p := range tc.remove {
				require.NoError(t, os.RemoveAll(tree.Path(p)))
			}
			if tc.devices != "" {
				require.NoError(t, tree.WriteFile("/proc/devices", []byte(tc.devices)))
			}
			h, err := discoverTree(t, tree)
			require.NoError(t, err)
			if tc.loaded == "" {
				require.Len(t, h.Warnings, 1, h.Warnings)
				require.Contains(t, h.Warnings[0], "the kunlun driver does not seem to be loaded")
				require.Zero(t, countContaining(h.Notes, "proc/xpu not present"))
				return
			}
			require.Empty(t, h.Warnings)
			require.Equal(t, 1, countContaining(h.Notes, tc.loaded), h.Notes)
		})
	}
}

// copyLibrary copies the library at the in-tree path from of src to the
// in-tree path to of tree, creating its directory.
func copyLibrary(t *testing.T, src *fakehost.Tree, from string, tree *fakehost.Tree, to string) {
	t.Helper()
	data, err := os.ReadFile(src.Path(from))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(tree.Path(to)), 0o755))
	require.NoError(t, os.WriteFile(tree.Path(to), data, 0o755))
}

// writeCache replaces the tree's ld.so.cache.
func writeCache(t *testing.T, tree *fakehost.Tree, entries ...ldcache.Entry) {
	t.Helper()
	for i := range entries {
		entries[i].Flags = ldcache.FlagELFLibc6 | ldcache.FlagX8664Lib64
	}
	data, err := ldcache.Encode(entries)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tree.Path("/etc/ld.so.cache"), data, 0o644))
}

// TestUpgradeLeftovers checks that the leftovers of an XRE upgrade give
// one runtime library, the one of the XRE /usr/local/xpu names, and notes
// that say what was left out and why.
func TestUpgradeLeftovers(t *testing.T) {
	old := build(t, fakehost.K200()) // an XRE 4 install to take libxpurt.so.1 from
	nvml := ldcache.Entry{Name: "libxpunvidia-ml.so.1", Path: "/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1"}
	for _, tc := range []struct {
		description string
		tweak       func(t *testing.T, tree *fakehost.Tree)
		runtime     []string
		note        string
		warning     string
	}{
		{
			description: "so/libxpurt.so.2 and lib64/libxpurt.so.1 both present",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				copyLibrary(t, old, old.XREDir+"/lib64/libxpurt.so.1", tree, tree.XREDir+"/lib64/libxpurt.so.1")
				copyLibrary(t, old, old.XREDir+"/lib64/libxpuml.so.1", tree, tree.XREDir+"/lib64/libxpuml.so.1")
			},
			runtime: []string{"/usr/local/xpu/so/libxpurt.so.2"},
			note:    "/usr/local/xpu/lib64/libxpurt.so.1 left out: libxpurt.so comes from /usr/local/xpu/so",
		},
		{
			description: "a stale version directory in ld.so.cache",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				copyLibrary(t, old, old.XREDir+"/lib64/libxpurt.so.1", tree, "/usr/local/xpu-4.33.0/lib64/libxpurt.so.1")
				writeCache(t, tree, nvml, ldcache.Entry{Name: "libxpurt.so.1", Path: "/usr/local/xpu-4.33.0/lib64/libxpurt.so.1"})
			},
			runtime: []string{"/usr/local/xpu/so/libxpurt.so.2"},
			note:    "/usr/local/xpu-4.33.0/lib64/libxpurt.so.1 (ld.so.cache) left out",
		},
		{
			description: "only the stale version directory has a runtime",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				require.NoError(t, os.Remove(tree.Path(tree.XREDir+"/so/libxpurt.so.2")))
				require.NoError(t, os.Remove(tree.Path(tree.XREDir+"/so/libxpurt.so")))
				copyLibrary(t, old, old.XREDir+"/lib64/libxpurt.so.1", tree, "/usr/local/xpu-4.33.0/lib64/libxpurt.so.1")
				writeCache(t, tree, nvml, ldcache.Entry{Name: "libxpurt.so.1", Path: "/usr/local/xpu-4.33.0/lib64/libxpurt.so.1"})
			},
			note:    "a stale XRE version directory (/usr/local/xpu names /usr/local/xpu-" + fakehost.XREVersionP800 + ")",
			warning: "libxpurt.so.N not found",
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := build(t, fakehost.P800XRE5())
			tc.tweak(t, tree)
			var first []discover.DriverFile
			for range 2 { // the choice does not depend on the run
				h, err := discoverTree(t, tree)
				require.NoError(t, err)
				var runtime []string
				for _, l := range h.Libraries {
					if strings.HasPrefix(l.Soname, "libxpurt.so") {
						runtime = append(runtime, l.Path)
					}
					if l.Soname == "libxpuml.so.1" {
						require.Equal(t, "/usr/local/xpu/so/libxpuml.so.1", l.Path)
					}
				}
				require.Equal(t, tc.runtime, runtime)
				require.Equal(t, 1, countContaining(h.Notes, tc.note), h.Notes)
				if tc.warning != "" {
					require.Equal(t, 1, countContaining(h.Warnings, tc.warning), h.Warnings)
				} else {
					require.Empty(t, h.Warnings)
					require.Equal(t, 1, countContaining(h.Notes, "runtime library: /usr/local/xpu/so/libxpurt.so.2 (/usr/local/xpu/so is the first"), h.Notes)
				}
				if first == nil {
					first = h.Libraries
				} else {
					require.Equal(t, first, h.Libraries)
				}
			}
		})
	}
}

// TestXRE5BadInput checks that each broken part of a driver install is one
// warning naming the file, and that the rest of what is discovered is what
// the healthy host gives.
func TestXRE5BadInput(t *testing.T) {
	healthy := build(t, fakehost.P800XRE5())
	hh, err := discoverTree(t, healthy)
	require.NoError(t, err)
	want := libraryPaths(hh, healthy.Root)
	probe := filepath.Join(t.TempDir(), "probe")
	require.NoError(t, fakehost.BuildCUDAProbe(probe, fakehost.WithCacheDir(fakehosttest.CacheDir(t))))

	for _, tc := range []struct {
		description string
		tweak       func(t *testing.T, tree *fakehost.Tree)
		warning     string
		libraries   func(map[string]string) map[string]string
	}{
		{
			description: "a dangling link in so/",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				require.NoError(t, os.Symlink("libxpuapi.so.9", tree.Path(tree.XREDir+"/so/libxpuapi.so")))
			},
			warning: "driver library link /usr/local/xpu/so/libxpuapi.so under driver root " + "%ROOT%" + " is dangling",
		},
		{
			description: "a library without a SONAME",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				data, err := os.ReadFile(probe) // a PIE program: ELF, no DT_SONAME
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(tree.Path(tree.XREDir+"/so/libxpuapi.so"), data, 0o755))
			},
			warning: "driver library /usr/local/xpu/so/libxpuapi.so under driver root %ROOT% is not a usable shared library (",
		},
		{
			description: "so/ is not a directory",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				so := tree.Path(tree.XREDir + "/so")
				require.NoError(t, os.RemoveAll(so))
				require.NoError(t, os.WriteFile(so, []byte("x"), 0o644))
			},
			warning: "XRE library directory /usr/local/xpu/so under driver root %ROOT% cannot be read",
			libraries: func(m map[string]string) map[string]string {
				return map[string]string{"/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1": m["/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1"]}
			},
		},
		{
			description: "the /usr/local/xpu link points nowhere",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				link := tree.Path("/usr/local/xpu")
				require.NoError(t, os.Remove(link))
				require.NoError(t, os.Symlink("xpu-5.0.99.1", link))
			},
			warning: "XRE link /usr/local/xpu under driver root %ROOT% points to /usr/local/xpu-5.0.99.1, which does not exist",
			libraries: func(m map[string]string) map[string]string {
				return map[string]string{"/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1": m["/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1"]}
			},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := build(t, fakehost.P800XRE5())
			tc.tweak(t, tree)
			h, err := discoverTree(t, tree)
			require.NoError(t, err)
			warning := strings.ReplaceAll(tc.warning, "%ROOT%", tree.Root)
			require.Equal(t, 1, countContaining(h.Warnings, warning), "%q in %q", warning, h.Warnings)
			wantLibs := want
			if tc.libraries != nil {
				wantLibs = tc.libraries(want)
			}
			require.Equal(t, wantLibs, libraryPaths(h, tree.Root))
			require.Len(t, h.Devices, 8)
			require.NotNil(t, h.Control)
		})
	}
}

// TestUnreadableXREDir makes so/ unreadable (mode 0) and discovers the host
// as a user the mode applies to: root reads anything, so a root test runs
// the discovery in a child process of this test binary as nobody.
func TestUnreadableXREDir(t *testing.T) {
	if root := os.Getenv("XPU_CDI_TEST_UNREADABLE_ROOT"); root != "" {
		// The child: discover and print what the parent checks.
		h, err := discover.Discover(discover.WithDevRoot(root), discover.WithDriverRoot(root))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"warnings": h.Warnings, "libraries": libraryPaths(h, root), "devices": len(h.Devices)})
		os.Exit(0)
	}
	parent, err := os.MkdirTemp("", "xpu-unreadable-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	require.NoError(t, os.Chmod(parent, 0o755))
	tree, err := fakehost.Build(filepath.Join(parent, "host"), fakehost.P800XRE5(), fakehost.WithCacheDir(fakehosttest.CacheDir(t)))
	require.NoError(t, err)
	so := tree.Path(tree.XREDir + "/so")
	require.NoError(t, os.Chmod(so, 0))
	t.Cleanup(func() { _ = os.Chmod(so, 0o755) })

	if os.Geteuid() != 0 {
		h, err := discover.Discover(tree.DiscoverOptions()...)
		require.NoError(t, err)
		require.Equal(t, 1, countContaining(h.Warnings, "XRE library directory /usr/local/xpu/so under driver root "+tree.Root+" cannot be read"), h.Warnings)
		return
	}
	// The test binary may sit in a directory only root can enter.
	self, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	bin := filepath.Join(parent, "discover.test")
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	cmd := exec.Command(bin, "-test.run=^TestUnreadableXREDir$", "-test.count=1")
	cmd.Env = []string{"XPU_CDI_TEST_UNREADABLE_ROOT=" + tree.Root, "PATH=/usr/bin:/bin"}
	cmd.Dir = parent
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	var got struct {
		Warnings  []string          `json:"warnings"`
		Libraries map[string]string `json:"libraries"`
		Devices   int               `json:"devices"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.Equal(t, 1, countContaining(got.Warnings, "XRE library directory /usr/local/xpu/so under driver root "+tree.Root+" cannot be read (open "+so+": permission denied)"), got.Warnings)
	require.Equal(t, map[string]string{
		"/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1": "/lib/x86_64-linux-gnu/libxpunvidia-ml.so." + fakehost.XREVersionP800,
	}, got.Libraries, "the rest is still found")
	require.Equal(t, 8, got.Devices)
}
