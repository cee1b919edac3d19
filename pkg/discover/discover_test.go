package discover_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func build(t *testing.T, h fakehost.Host) *fakehost.Tree {
	t.Helper()
	return fakehosttest.Build(t, h)
}

func discoverTree(t *testing.T, tree *fakehost.Tree, opts ...discover.Option) (*discover.Host, error) {
	t.Helper()
	return discover.Discover(append(tree.DiscoverOptions(), opts...)...)
}

// TestShapes compares discovery with what the builder says it built, for
// every shape of fake host.
func TestShapes(t *testing.T) {
	for _, tc := range []struct {
		description string
		host        fakehost.Host
		compute     []int
		warning     string
	}{
		{description: "8 x P800", host: fakehost.P800x8(), compute: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{description: "R200 with SR-IOV: the PF with VFs is not offered", host: fakehost.R200SRIOV(), compute: []int{1, 2, 3, 4}},
		{description: "K200: two power domains on one PCI function", host: fakehost.K200(), compute: []int{0, 1}},
		{description: "degraded host: gaps, missing procfs and sysfs, unknown ID", host: fakehost.Degraded(), compute: []int{0, 1, 3}, warning: "xpu-smi not found"},
		{description: "P800 with driver and XRE 5: no /proc/xpu, no /sys/class/xpu", host: fakehost.P800XRE5(), compute: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{description: "P800 through /sys/dev/char: class kunlun, nodes not in address order", host: fakehost.P800Sysfs(), compute: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{description: "P800 with SR-IOV on driver 5: the PF with VFs is not offered", host: fakehost.P800SRIOV(), compute: []int{1, 2, 3}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := build(t, tc.host)
			h, err := discoverTree(t, tree)
			require.NoError(t, err)
			require.NoError(t, h.CheckUsable())
			require.NotNil(t, h.Control)
			wantCtrl := fakehost.CtrlMinor
			if tc.host.CtrlMinor != 0 {
				wantCtrl = tc.host.CtrlMinor
			}
			require.Equal(t, wantCtrl, h.Control.Minor)

			var got []int
			for _, d := range h.ComputeDevices() {
				got = append(got, d.Index)
			}
			require.Equal(t, tc.compute, got)

			built := 0
			for _, td := range tree.Devices {
				if !td.HasNode {
					require.Nil(t, h.Device(td.Index), "device %d has no node and must not be found", td.Index)
					continue
				}
				built++
				d := h.Device(td.Index)
				require.NotNil(t, d, "device %d", td.Index)
				require.Equal(t, td.Path, d.Node.Path)
				require.Equal(t, filepath.Join(tree.Root, td.Path), d.Node.HostPath)
				require.Equal(t, td.Major, d.Node.Major)
				require.Equal(t, td.Minor, d.Node.Minor)
				require.Equal(t, tc.host.NodeMode.Perm(), d.Node.Mode)
				if td.HasSysfs || td.HasProc {
					require.Equal(t, td.BDF, d.Address())
				} else {
					require.Empty(t, d.Address())
				}
				if td.HasProc {
					require.Equal(t, td.Serial, d.Serial)
					require.Equal(t, td.State, d.State)
					require.Equal(t, td.DeviceName, d.ProcDeviceName)
				} else {
					require.Empty(t, d.Serial, "a device without procfs must not get a guessed serial")
					if tc.host.XRE5() {
						require.Empty(t, d.Problems, "an optional source absent on the whole host is a note, not a problem per device")
					} else {
						require.NotEmpty(t, d.Problems)
					}
				}
				if td.HasSysfs {
					require.NotNil(t, d.PCI)
					require.Equal(t, td.DeviceID, d.PCI.DeviceID)
					require.Equal(t, td.NUMANode, d.PCI.NUMANode)
					require.Equal(t, string(td.Function), string(d.PCI.Function))
					require.Equal(t, td.Parent, d.PCI.Parent)
					require.Equal(t, len(td.VFs) == 0, d.Compute)
					wantModel := td.Model
					if wantModel == "" {
						wantModel = discover.ModelUnknown
					}
					if td.Function == fakehost.FunctionVF {
						wantModel += " VF"
					}
					require.Equal(t, wantModel, d.Model)
				} else {
					require.Nil(t, d.PCI, "a device without sysfs must not get guessed PCI facts")
				}
			}
			require.Len(t, h.Devices, built)

			for _, lib := range tree.Libraries {
				require.Truef(t, hasLibrary(h, lib.SONAME), "library %s (%s) not discovered", lib.SONAME, lib.Path)
			}
			if tc.warning != "" {
				require.Contains(t, strings.Join(h.Warnings, "\n"), tc.warning)
			} else {
				require.Empty(t, h.Warnings, "a healthy host has no warnings")
			}
		})
	}
}

func hasLibrary(h *discover.Host, soname string) bool {
	for _, l := range h.Libraries {
		if l.Soname == soname {
			return true
		}
	}
	return false
}

func TestDriverFiles(t *testing.T) {
	tree := build(t, fakehost.P800x8())
	h, err := discoverTree(t, tree)
	require.NoError(t, err)

	var rt *discover.DriverFile
	for i := range h.Libraries {
		if h.Libraries[i].Soname == "libxpurt.so.1" {
			rt = &h.Libraries[i]
		}
	}
	require.NotNil(t, rt)
	require.Equal(t, "/usr/local/xpu/lib64/libxpurt.so.1", rt.Path, "the container path keeps the XRE version link")
	require.Equal(t, filepath.Join(tree.Root, tree.XREDir, "lib64", "libxpurt.so.1"), rt.HostPath, "the host path is the real file")
	require.Equal(t, []string{"libxpurt.so"}, rt.Links)

	require.Len(t, h.Tools, 1)
	require.Equal(t, discover.ToolPath, h.Tools[0].Path)
	st, err := os.Stat(h.Tools[0].HostPath)
	require.NoError(t, err)
	require.True(t, st.Mode().IsRegular())
	require.Equal(t, []string{discover.ToolAlias}, h.Tools[0].Links)
	require.Empty(t, h.Warnings)
}

// TestPartialHosts checks that what cannot be read is reported, not guessed.
func TestPartialHosts(t *testing.T) {
	for _, tc := range []struct {
		description string
		tweak       func(*fakehost.Host)
		check       func(t *testing.T, h *discover.Host, err error)
	}{
		{
			description: "no device node at all",
			tweak:       func(h *fakehost.Host) { h.NoNodes = true },
			check: func(t *testing.T, h *discover.Host, err error) {
				require.ErrorIs(t, err, discover.ErrNoDevices)
				require.Contains(t, err.Error(), "no Kunlun XPU found under ")
			},
		},
		{
			description: "no control node",
			tweak:       func(h *fakehost.Host) { h.NoCtrl = true },
			check: func(t *testing.T, h *discover.Host, err error) {
				require.NoError(t, err)
				require.Nil(t, h.Control)
				require.ErrorIs(t, h.CheckUsable(), discover.ErrNoControlNode)
			},
		},
		{
			description: "no sysfs: PCI addresses from procfs, no PCI IDs",
			tweak:       func(h *fakehost.Host) { h.NoSysfs = true },
			check: func(t *testing.T, h *discover.Host, err error) {
				require.NoError(t, err)
				require.Len(t, h.Devices, 8)
				for _, d := range h.Devices {
					require.Nil(t, d.PCI)
					require.True(t, discover.IsPCIAddress(d.Address()))
					require.Equal(t, discover.ModelUnknown, d.Model)
				}
				require.Contains(t, strings.Join(h.Notes, "\n"), "sys/class/xpu not present")
				require.Empty(t, h.Warnings, "sysfs is optional")
			},
		},
		{
			description: "no procfs: nothing invented",
			tweak:       func(h *fakehost.Host) { h.NoProcfs = true },
			check: func(t *testing.T, h *discover.Host, err error) {
				require.NoError(t, err)
				require.Equal(t, fakehost.DriverVersionP800, h.DriverVersion, "from /sys/module/kunlun/version")
				for _, d := range h.Devices {
					require.Empty(t, d.Serial)
					require.Empty(t, d.State)
					require.Equal(t, "P800", d.Model, "sysfs still names the model")
				}
			},
		},
		{
			description: "no driver files: a warning, not a failure",
			tweak:       func(h *fakehost.Host) { h.NoDriver = true },
			check: func(t *testing.T, h *discover.Host, err error) {
				require.NoError(t, err)
				require.Empty(t, h.Libraries)
				require.Empty(t, h.Tools)
				require.Contains(t, strings.Join(h.Warnings, "\n"), "libxpurt.so.N not found")
				require.NoError(t, h.CheckUsable())
			},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			host := fakehost.P800x8()
			tc.tweak(&host)
			tree := build(t, host)
			h, err := discoverTree(t, tree)
			tc.check(t, h, err)
		})
	}
}

func TestMissingDevDir(t *testing.T) {
	_, err := discover.Discover(discover.WithDevRoot(t.TempDir()), discover.WithDriverRoot(t.TempDir()))
	require.True(t, errors.Is(err, discover.ErrNoDevices))
}

func TestNonCharNodeIgnored(t *testing.T) {
	// As root the builder makes real nodes; add a bogus regular file.
	testreq.Root(t, "real device nodes")
	tree := build(t, fakehost.P800x8())
	require.NoError(t, os.WriteFile(filepath.Join(tree.Root, "dev", "xpu9"), nil, 0o644))
	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	require.Nil(t, h.Device(9))
	require.Contains(t, strings.Join(h.Warnings, "\n"), "xpu9 is not a character device")
}

// TestNodeStaterSeam runs discovery on a tree whose nodes are plain files,
// the way it runs for a test that is not root.
func TestNodeStaterSeam(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.P800x8(), fakehost.WithoutMknod())
	require.False(t, tree.RealNodes)

	_, err := discover.Discover(discover.WithDevRoot(tree.Root), discover.WithDriverRoot(tree.Root))
	require.ErrorIs(t, err, discover.ErrNoDevices, "regular files are not device nodes")

	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	require.Len(t, h.ComputeDevices(), 8)
	require.Equal(t, uint32(6), h.Device(3).Node.Minor)
}

// TestLibraryFromLdcache finds the XRE runtime installed outside
// /usr/local/xpu through the driver root's ld.so.cache only.
func TestLibraryFromLdcache(t *testing.T) {
	src := build(t, fakehost.P800x8())
	host := fakehost.P800x8()
	host.NoDriver = true
	tree := build(t, host)

	libDir := filepath.Join(tree.Root, "opt", "xre", "lib")
	require.NoError(t, os.MkdirAll(libDir, 0o755))
	data, err := os.ReadFile(filepath.Join(src.Root, src.XREDir, "lib64", "libxpurt.so.1"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(libDir, "libxpurt.so.1"), data, 0o755))
	cache, err := ldcache.Encode([]ldcache.Entry{
		{Name: "libxpurt.so.1", Path: "/opt/xre/lib/libxpurt.so.1", Flags: ldcache.FlagELFLibc6 | ldcache.FlagX8664Lib64},
		{Name: "libc.so.6", Path: "/lib/x86_64-linux-gnu/libc.so.6", Flags: ldcache.FlagELFLibc6 | ldcache.FlagX8664Lib64},
	})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(tree.Root, "etc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tree.Root, "etc", "ld.so.cache"), cache, 0o644))

	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	require.Len(t, h.Libraries, 1, "only XRE libraries are taken from the cache")
	require.Equal(t, "/opt/xre/lib/libxpurt.so.1", h.Libraries[0].Path)
	require.Equal(t, filepath.Join(libDir, "libxpurt.so.1"), h.Libraries[0].HostPath)
	require.NotContains(t, strings.Join(h.Warnings, "\n"), "libxpurt.so.N not found")
}

// TestSysfsLinkForms reads PCI addresses from links that do not end in the
// address (the kernel's links do; a hand-made tree may not).
func TestSysfsLinkForms(t *testing.T) {
	tree := build(t, fakehost.R200SRIOV())
	for _, d := range tree.Devices {
		if !d.HasSysfs {
			continue
		}
		link := filepath.Join(tree.Root, "sys", "class", "xpu", filepath.Base(d.Path), "device")
		require.NoError(t, os.Remove(link))
		require.NoError(t, os.Symlink("../..", link))
	}
	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	for _, d := range tree.Devices {
		if d.HasSysfs {
			require.Equal(t, d.BDF, h.Device(d.Index).Address())
			require.Equal(t, d.Parent, h.Device(d.Index).PCI.Parent)
		}
	}
}
