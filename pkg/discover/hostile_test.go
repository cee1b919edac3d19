package discover_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/labels"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// TestDiscoverBoundedOnHostileFiles: FIFOs and oversized files where
// discovery reads (a procfs info file, the driver root's ld.so.cache, a
// library and a library link) never block it, and are skipped: the rest of
// the host is still found.
func TestDiscoverBoundedOnHostileFiles(t *testing.T) {
	for _, tc := range []struct {
		description string
		shape       func(t *testing.T, tree *fakehost.Tree)
	}{
		{
			description: "FIFOs",
			shape: func(t *testing.T, tree *fakehost.Tree) {
				fifo := func(p string) {
					require.NoError(t, os.RemoveAll(p))
					require.NoError(t, unix.Mkfifo(p, 0o644))
				}
				fifo(tree.Path("/proc/xpu/dev0/info"))
				fifo(tree.Path("/etc/ld.so.cache"))
				libDir := tree.Path(filepath.Dir(tree.Libraries[0].Path))
				fifo(filepath.Join(libDir, "libfifo.so.1"))
				require.NoError(t, os.Symlink("libfifo.so.1", filepath.Join(libDir, "libfifo.so")))
			},
		},
		{
			description: "oversized files",
			shape: func(t *testing.T, tree *fakehost.Tree) {
				big := func(p string, size int64) {
					require.NoError(t, os.RemoveAll(p))
					require.NoError(t, os.WriteFile(p, []byte("DeviceName:\t"), 0o644))
					require.NoError(t, os.Truncate(p, size))
				}
				big(tree.Path("/proc/xpu/dev0/info"), 1<<30)
				big(tree.Path("/etc/ld.so.cache"), 10<<30)
			},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := build(t, fakehost.P800x8())
			tc.shape(t, tree)
			type result struct {
				h   *discover.Host
				err error
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				h, err := discoverTree(t, tree)
				done <- result{h, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("discovery blocks")
			}
			t.Logf("discovery took %s", time.Since(start))
			require.NoError(t, r.err)
			require.Len(t, r.h.ComputeDevices(), 8, "the devices are still found")
			found := false
			for _, l := range r.h.Libraries {
				require.NotContains(t, l.HostPath, "libfifo", "a FIFO is never a library")
				found = found || strings.HasPrefix(l.Soname, discover.RuntimeFamily+".")
			}
			require.True(t, found, "the XRE is still found")
		})
	}
}

// TestDevCharHostileLinks: a /sys/dev/char entry (or the device link of the
// class device it leads to) that loops, leaves the sysfs tree, or leads to
// something that is not a PCI function gives the device one problem naming
// the entry and no PCI address; files that would block or are too large
// are refused. The other devices are found as ever.
func TestDevCharHostileLinks(t *testing.T) {
	const entry = "/sys/dev/char/195:0"
	for _, tc := range []struct {
		description string
		shape       func(t *testing.T, tree *fakehost.Tree, classDev string)
		want        string
	}{
		{
			description: "entry links to itself",
			shape:       func(t *testing.T, tree *fakehost.Tree, _ string) { relink(t, tree, entry, "195:0") },
			want:        "symlink loop",
		},
		{
			description: "entry loops through another link",
			shape: func(t *testing.T, tree *fakehost.Tree, _ string) {
				relink(t, tree, entry, "loop")
				relink(t, tree, "/sys/dev/char/loop", "195:0")
			},
			want: "symlink loop",
		},
		{
			description: "device link loops",
			shape: func(t *testing.T, tree *fakehost.Tree, classDev string) {
				relink(t, tree, classDev+"/device", "device")
			},
			want: "symlink loop",
		},
		{
			description: "entry is an absolute link out of the tree",
			shape:       func(t *testing.T, tree *fakehost.Tree, _ string) { relink(t, tree, entry, "/etc") },
			want:        "outside /sys/devices",
		},
		{
			description: "entry climbs out of the root",
			shape: func(t *testing.T, tree *fakehost.Tree, _ string) {
				relink(t, tree, entry, strings.Repeat("../", 20)+"tmp")
			},
			want: "outside /sys/devices",
		},
		{
			description: "entry leads into sysfs but not to a device",
			shape:       func(t *testing.T, tree *fakehost.Tree, _ string) { relink(t, tree, entry, "../../module/kunlun") },
			want:        "leads to /sys/module/kunlun, outside /sys/devices",
		},
		{
			description: "device link climbs out of the root",
			shape: func(t *testing.T, tree *fakehost.Tree, classDev string) {
				relink(t, tree, classDev+"/device", strings.Repeat("../", 20)+"etc")
			},
			want: "outside /sys/devices",
		},
		{
			description: "a virtual device: no device link",
			shape: func(t *testing.T, tree *fakehost.Tree, _ string) {
				dir := "/sys/devices/virtual/kunlun/xpu0"
				require.NoError(t, os.MkdirAll(tree.Path(dir), 0o755))
				require.NoError(t, os.WriteFile(tree.Path(dir+"/dev"), []byte("195:0\n"), 0o444))
				relink(t, tree, entry, "../../devices/virtual/kunlun/xpu0")
			},
			want: "device not found: the device has no parent, not a PCI function",
		},
		{
			description: "device link to a platform device named like a PCI address",
			shape: func(t *testing.T, tree *fakehost.Tree, classDev string) {
				require.NoError(t, os.MkdirAll(tree.Path("/sys/devices/platform/0000:82:00.0"), 0o755))
				require.NoError(t, os.WriteFile(tree.Path("/sys/devices/platform/0000:82:00.0/vendor"), []byte("0x1d22\n"), 0o444))
				relink(t, tree, classDev+"/device", "../../../../../platform/0000:82:00.0")
			},
			want: "leads to /sys/devices/platform/0000:82:00.0: not a PCI function",
		},
		{
			description: "device link to a dangling PCI function",
			shape: func(t *testing.T, tree *fakehost.Tree, classDev string) {
				relink(t, tree, classDev+"/device", "../../../0000:99:00.0")
			},
			want: "0000:99:00.0: not found",
		},
		{
			description: "entry leads to another node's class device",
			shape: func(t *testing.T, tree *fakehost.Tree, _ string) {
				relink(t, tree, entry, "195:1")
			},
			want: `whose dev file says "195:1", not 195:0`,
		},
		{
			description: "entry missing",
			shape: func(t *testing.T, tree *fakehost.Tree, _ string) {
				require.NoError(t, os.Remove(tree.Path(entry)))
			},
			want: "not found: no char device of the kernel has the number 195:0",
		},
		{
			description: "dev file is a FIFO",
			shape: func(t *testing.T, tree *fakehost.Tree, classDev string) {
				require.NoError(t, os.Remove(tree.Path(classDev+"/dev")))
				require.NoError(t, unix.Mkfifo(tree.Path(classDev+"/dev"), 0o644))
			},
			want: "whose dev file is unreadable or empty",
		},
		{
			description: "vendor file of a gigabyte",
			shape: func(t *testing.T, tree *fakehost.Tree, classDev string) {
				require.NoError(t, tree.Truncate(classDev+"/device/vendor", 1<<30))
			},
			want: "larger than 65536 bytes",
		},
		{
			description: "vendor file is a link out of the tree",
			shape: func(t *testing.T, tree *fakehost.Tree, classDev string) {
				relink(t, tree, classDev+"/device/vendor", "/etc/hostname")
			},
			want: "too many levels of symbolic links",
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := build(t, fakehost.P800Sysfs())
			td := tree.Devices[0]
			require.Equal(t, entry, td.DevChar)
			tc.shape(t, tree, td.SysfsPath)
			done := make(chan struct{})
			var (
				h   *discover.Host
				err error
			)
			go func() {
				defer close(done)
				h, err = discoverTree(t, tree)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("discovery blocks")
			}
			require.NoError(t, err)
			d := h.Device(0)
			require.Len(t, d.Problems, 1, d.Problems)
			t.Log(strings.ReplaceAll(d.Problems[0], tree.Root, "<root>"))
			require.Contains(t, d.Problems[0], tree.Path(entry), "the problem names the entry")
			require.Contains(t, d.Problems[0], tc.want)
			require.Nil(t, d.PCI, "no PCI facts")
			require.Empty(t, d.Address(), "no guessed address")
			require.Equal(t, discover.ModelUnknown, d.Model)
			for _, other := range tree.Devices[1:] {
				require.Equal(t, other.BDF, h.Device(other.Index).Address())
				require.Empty(t, h.Device(other.Index).Problems)
			}
			require.Empty(t, h.Warnings, "one device not mapped: its function may be it, no host warning")
		})
	}
}

// TestDiscoverRefusesFinalSymlinks: a kernel text file discovery reads by
// path (/proc/xpu/version of the 4.x driver, /sys/module/kunlun/version of
// the 5.x one, a sysfs dev attribute) that is a symlink, to a private file
// elsewhere or to /dev/zero, is refused, not followed: its content never
// becomes the driver version (a label, an attribute), and the read ends at
// once.
func TestDiscoverRefusesFinalSymlinks(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("s3cr3t\n"), 0o600))
	for _, tc := range []struct {
		description string
		shape       fakehost.Host
		file        string
	}{
		{description: "4.x /proc/xpu/version", shape: fakehost.R200SRIOV(), file: "/proc/xpu/version"},
		{description: "P800 /proc/xpu/version", shape: fakehost.P800x8(), file: "/proc/xpu/version"},
		{description: "5.x /sys/module/kunlun/version", shape: fakehost.P800XRE5(), file: "/sys/module/kunlun/version"},
	} {
		for _, target := range []string{secret, "/dev/zero"} {
			t.Run(tc.description+" -> "+target, func(t *testing.T) {
				tree := build(t, tc.shape)
				// The 5.x driver's sysfs version file, which the shape
				// does not have, is planted as a link.
				require.NoError(t, os.MkdirAll(tree.Path(filepath.Dir(tc.file)), 0o755))
				relink(t, tree, tc.file, target)
				h := discoverWithin(t, tree)
				require.NotContains(t, h.DriverVersion, "s3cr3t")
				require.Empty(t, h.DriverVersion, "a link is not the driver's version file")
				require.NotEmpty(t, h.ComputeDevices())
			})
		}
	}
	t.Run("sysfs dev attribute", func(t *testing.T) {
		tree := build(t, fakehost.P800Sysfs())
		classDev := tree.Devices[0].SysfsPath
		other := filepath.Join(t.TempDir(), "dev")
		require.NoError(t, os.WriteFile(other, []byte("195:0\n"), 0o600))
		relink(t, tree, classDev+"/dev", other)
		h := discoverWithin(t, tree)
		require.Len(t, h.Device(0).Problems, 1)
		require.Contains(t, h.Device(0).Problems[0], "whose dev file is unreadable or empty")
		require.Nil(t, h.Device(0).PCI)
	})
}

// discoverWithin discovers the tree, failing the test if that takes more
// than 30 s (a read that blocks or never ends).
func discoverWithin(t *testing.T, tree *fakehost.Tree) *discover.Host {
	t.Helper()
	type result struct {
		h   *discover.Host
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := discoverTree(t, tree)
		done <- result{h, err}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.h
	case <-time.After(30 * time.Second):
		t.Fatal("discovery blocks")
		return nil
	}
}

// TestDiscoverResolvesDirectoriesInRoot: /proc/xpu -> ../../elsewhere and
// /sys/module/kunlun -> /elsewhere lead out of the dev root to 0600 files
// of the driver's shapes. Every directory on the way is resolved inside the
// root, so nothing of them is read: not the driver version, nor a device's
// facts, nor the labels made of them. Runs as an ordinary user.
func TestDiscoverResolvesDirectoriesInRoot(t *testing.T) {
	for _, shape := range []fakehost.Host{fakehost.R200SRIOV(), fakehost.P800x8(), fakehost.P800XRE5()} {
		t.Run(shape.Shape, func(t *testing.T) {
			tree := build(t, shape)
			fakehosttest.LinkDirsOut(t, tree)
			h := discoverWithin(t, tree)
			require.NotEmpty(t, h.ComputeDevices())
			data, err := json.Marshal(h)
			require.NoError(t, err)
			require.NotContains(t, string(data), fakehosttest.OutsideSecret)
			require.Empty(t, h.DriverVersion)
			for _, d := range h.Devices {
				require.NotContains(t, fmt.Sprintf("%+v", h.FactsOf(d)), fakehosttest.OutsideSecret)
				require.NotEqual(t, int64(4242), d.MemoryMiB)
			}
			for _, l := range labels.For(h, "", nil) {
				require.NotContains(t, l.String(), fakehosttest.OutsideSecret)
			}
		})
	}
}
