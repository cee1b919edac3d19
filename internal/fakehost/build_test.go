package fakehost

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// checkNodes compares every node in the tree with the kernel facts: with
// unix.Stat on real char devices, with NodeFacts otherwise.
func checkNodes(t *testing.T, tr *Tree, mode os.FileMode, uid, gid uint32) {
	t.Helper()
	paths := map[string]uint32{}
	for _, d := range tr.Devices {
		if d.HasNode {
			paths[d.Path] = d.Minor
		} else {
			require.False(t, exists(tr, d.Path), "%s should not exist", d.Path)
		}
	}
	if tr.Ctrl != "" {
		paths[tr.Ctrl] = tr.Host.ctrlMinor()
	}
	for p, minor := range paths {
		full := tr.Path(p)
		facts, ok := tr.NodeFacts(full)
		require.True(t, ok, "no facts for %s", full)
		require.Equal(t, NodeFacts{Major: tr.Major, Minor: minor, Mode: mode, UID: uid, GID: gid}, facts, p)
		var st unix.Stat_t
		require.NoError(t, unix.Lstat(full, &st))
		if tr.RealNodes {
			require.Equal(t, uint32(unix.S_IFCHR), st.Mode&unix.S_IFMT, "%s is not a char device", p)
			require.Equal(t, tr.Major, unix.Major(st.Rdev), p)
			require.Equal(t, minor, unix.Minor(st.Rdev), p)
			require.Equal(t, uid, st.Uid, p)
			require.Equal(t, gid, st.Gid, p)
		} else {
			require.Equal(t, uint32(unix.S_IFREG), st.Mode&unix.S_IFMT, "%s should be a regular file", p)
		}
		require.Equal(t, uint32(mode.Perm()), st.Mode&0o777, p)
	}
}

type shapeCase struct {
	description string
	host        Host
	indexes     []int
	minors      []uint32
	mode        os.FileMode
	compute     []int // indexes offered for work
	check       func(t *testing.T, tr *Tree)
}

func shapeCases() []shapeCase {
	return []shapeCase{
		{
			description: "p800x8", host: P800x8(),
			indexes: []int{0, 1, 2, 3, 4, 5, 6, 7}, minors: []uint32{0, 2, 4, 6, 8, 10, 12, 14}, mode: 0o666,
			compute: []int{0, 1, 2, 3, 4, 5, 6, 7},
			check: func(t *testing.T, tr *Tree) {
				require.Equal(t, "DeviceName:\tKunlun3\nDeviceAddr:\t0000:01:00.0\nDeviceSN:\t02P00A5240V00101\nDriverVersion:\t5.0.21.21\n",
					readTree(t, tr, "/proc/xpu/dev0/info"))
				require.Equal(t, "0x3688\n", readTree(t, tr, "/sys/class/xpu/xpu5/device/device"))
				require.Equal(t, "1\n", readTree(t, tr, "/sys/class/xpu/xpu5/device/numa_node"))
				require.Equal(t, "0\n", readTree(t, tr, "/sys/class/xpu/xpu3/device/numa_node"))
				require.Equal(t, "L3: 0 / 96 MB\nMAIN: 0 / 98304 MB\n", readTree(t, tr, "/proc/xpu/dev7/mminfo"))
				require.Equal(t, "5.0.21.21\n", readTree(t, tr, "/proc/xpu/version"))
				require.Equal(t, "\n", readTree(t, tr, "/proc/xpu/probe_error"))
				require.Equal(t, "/usr/local/xpu-5.0.21.21", tr.XREDir)
				require.Contains(t, readTree(t, tr, "/etc/udev/rules.d/99-kunlun.rules"), `MODE="0666"`)
			},
		},
		{
			description: "p800-sysfs", host: P800Sysfs(),
			indexes: []int{0, 1, 2, 3, 4, 5, 6, 7}, minors: []uint32{0, 1, 2, 3, 4, 5, 6, 7}, mode: 0o666,
			compute: []int{0, 1, 2, 3, 4, 5, 6, 7},
			check: func(t *testing.T, tr *Tree) {
				var bdfs []string
				for _, d := range tr.Devices {
					bdfs = append(bdfs, d.BDF)
				}
				require.Equal(t, []string{
					"0000:82:00.0", "0000:03:00.0", "0000:84:00.0", "0000:01:00.0",
					"0000:81:00.0", "0000:02:00.0", "0000:83:00.0", "0000:04:00.0",
				}, bdfs, "nodes are not in PCI address order")
				require.Equal(t, 1, tr.Devices[0].NUMANode)
				require.False(t, exists(tr, "/sys/class/xpu"))
				require.Equal(t, "195:255\n", readTree(t, tr, "/sys/dev/char/195:255/dev"))
				ctrl, err := filepath.EvalSymlinks(tr.Path("/sys/dev/char/195:255"))
				require.NoError(t, err)
				require.Equal(t, tr.Path("/sys/devices/virtual/kunlun/xpuctrl"), ctrl)
				require.True(t, exists(tr, "/sys/bus/pci/drivers/kunlun/0000:82:00.0"))
			},
		},
		{
			description: "p800-xre5", host: P800XRE5(),
			indexes: []int{0, 1, 2, 3, 4, 5, 6, 7}, minors: []uint32{0, 1, 2, 3, 4, 5, 6, 7}, mode: 0o666,
			compute: []int{0, 1, 2, 3, 4, 5, 6, 7},
			check: func(t *testing.T, tr *Tree) {
				require.Equal(t, uint32(195), tr.Major)
				require.Equal(t, "/usr/local/xpu-5.0.21.47", tr.XREDir)
				for _, d := range []string{"bin", "include", "lib", "so", "tools", "profiler"} {
					require.DirExists(t, tr.Path(tr.XREDir+"/"+d))
				}
				target, err := os.Readlink(tr.Path("/lib/x86_64-linux-gnu/libxpunvidia-ml.so.1"))
				require.NoError(t, err)
				require.Equal(t, "libxpunvidia-ml.so.5.0.21.47", target)
				for _, l := range []string{XPUSMILink, XPUSMI5Alias} {
					target, err := os.Readlink(tr.Path(l))
					require.NoError(t, err)
					require.Equal(t, "../xpu/bin/xpu-smi", target)
				}
			},
		},
		{
			description: "r200-sriov", host: R200SRIOV(),
			indexes: []int{0, 1, 2, 3, 4}, minors: []uint32{0, 2, 4, 6, 8}, mode: 0o666,
			compute: []int{1, 2, 3, 4},
			check: func(t *testing.T, tr *Tree) {
				pf := "/sys/bus/pci/devices/0000:3b:00.0"
				require.Equal(t, "3\n", readTree(t, tr, pf+"/sriov_numvfs"))
				require.Equal(t, "3\n", readTree(t, tr, pf+"/sriov_totalvfs"))
				require.Equal(t, "0\n", readTree(t, tr, "/sys/bus/pci/devices/0000:5e:00.0/sriov_numvfs"))
				require.Equal(t, "0x0002\n", readTree(t, tr, pf+"/subsystem_vendor"))
				require.Equal(t, "0x0001\n", readTree(t, tr, pf+"/subsystem_device"))
				for k := range 3 {
					vf := fmt.Sprintf("/sys/bus/pci/devices/0000:3b:00.%d", k+1)
					got, err := filepath.EvalSymlinks(tr.Path(fmt.Sprintf("%s/virtfn%d", pf, k)))
					require.NoError(t, err)
					want, err := filepath.EvalSymlinks(tr.Path(vf))
					require.NoError(t, err)
					require.Equal(t, want, got)
					phys, err := filepath.EvalSymlinks(tr.Path(vf + "/physfn"))
					require.NoError(t, err)
					pfDir, err := filepath.EvalSymlinks(tr.Path(pf))
					require.NoError(t, err)
					require.Equal(t, pfDir, phys)
					require.Equal(t, "0x3685\n", readTree(t, tr, vf+"/device"))
				}
				require.Equal(t, []int{2, 3, 4}, tr.Devices[0].VFs)
				require.Equal(t, "0000:3b:00.0", tr.Devices[3].Parent)
				require.Equal(t, "L3: 0 / 63 MB\nMAIN: 0 / 5120 MB\n", readTree(t, tr, "/proc/xpu/dev3/mminfo"))
				require.Contains(t, readTree(t, tr, "/proc/xpu/dev4/info"), "DeviceAddr:\t0000:3b:00.3\n")
			},
		},
		{
			description: "k200", host: K200(),
			indexes: []int{0, 1}, minors: []uint32{0, 1}, mode: 0o666, compute: []int{0, 1},
			check: func(t *testing.T, tr *Tree) {
				info := "DeviceName: K200\nDeviceAddr: 0000:01:00.0\nDeviceSN: 22f\nFirmwareVersion: 0001.0000.0020\nCPLDVersion:     21\nDriverVersion: 4.33.0\n"
				require.Equal(t, info, readTree(t, tr, "/proc/xpu/dev0/info"))
				require.Equal(t, info, readTree(t, tr, "/proc/xpu/dev1/info"))
				require.Equal(t, "LOWPOWER\n", readTree(t, tr, "/proc/xpu/dev1/state"))
				require.Equal(t, "no error\n", readTree(t, tr, "/proc/xpu/dev1/errinfo"))
				require.False(t, exists(tr, "/proc/xpu/dev0/mminfo"), "Kunlun1 has no mminfo")
				d0, err := filepath.EvalSymlinks(tr.Path("/sys/class/xpu/xpu0/device"))
				require.NoError(t, err)
				d1, err := filepath.EvalSymlinks(tr.Path("/sys/class/xpu/xpu1/device"))
				require.NoError(t, err)
				require.Equal(t, d0, d1, "both domains sit on one PCI function")
				require.Equal(t, "0x0000\n", readTree(t, tr, "/sys/class/xpu/xpu1/device/subsystem_vendor"))
				require.Equal(t, "243:1\n", readTree(t, tr, "/sys/class/xpu/xpu1/dev"))
			},
		},
		{
			description: "degraded", host: Degraded(),
			indexes: []int{0, 1, 3}, minors: []uint32{0, 2, 6}, mode: 0o660, compute: []int{0, 1, 3},
			check: func(t *testing.T, tr *Tree) {
				require.False(t, exists(tr, "/dev/xpu2"))
				require.False(t, exists(tr, "/proc/xpu/dev1"))
				require.True(t, exists(tr, "/proc/xpu/dev3/info"))
				require.False(t, exists(tr, "/sys/class/xpu/xpu3"))
				require.False(t, exists(tr, "/sys/bus/pci/devices/0000:5f:00.0"))
				require.Equal(t, "0x3699\n", readTree(t, tr, "/sys/class/xpu/xpu0/device/device"))
				require.Equal(t, "ERROR\n", readTree(t, tr, "/proc/xpu/dev3/state"))
				require.Equal(t, "0000:5e:00.0 0 1 (nil) 804 Error init device\n", readTree(t, tr, "/proc/xpu/probe_error"))
				require.False(t, exists(tr, XPUSMILink))
				require.False(t, exists(tr, "/usr/local/xpu/bin/xpu_smi"))
				require.False(t, exists(tr, "/usr/local/xpu/lib64/libxpuml.so.1"))
				require.False(t, exists(tr, UdevRulesPath))
				require.Len(t, tr.Libraries, 2)
			},
		},
		{
			description: "scaled", host: Scaled(70, 12),
			mode: 0o666,
			check: func(t *testing.T, tr *Tree) {
				require.Len(t, tr.Devices, 70)
				require.Len(t, tr.Libraries, 12)
				require.Equal(t, uint32(126), tr.Devices[63].Minor)
				require.Equal(t, uint32(130), tr.Devices[64].Minor, "minor 128 belongs to xpuctrl")
				require.Equal(t, "0\n", readTree(t, tr, "/sys/class/xpu/xpu34/device/numa_node"))
				require.Equal(t, "1\n", readTree(t, tr, "/sys/class/xpu/xpu35/device/numa_node"))
			},
		},
	}
}

func TestShapes(t *testing.T) {
	for _, tc := range shapeCases() {
		for _, mknod := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/mknod=%v", tc.description, mknod), func(t *testing.T) {
				var opts []Option
				if !mknod {
					opts = append(opts, WithoutMknod())
				}
				tr := build(t, tc.host, opts...)
				require.Equal(t, mknod && os.Geteuid() == 0, tr.RealNodes)
				if tc.indexes != nil {
					var idx []int
					var minors []uint32
					for _, d := range tr.Devices {
						if d.HasNode {
							idx = append(idx, d.Index)
							minors = append(minors, d.Minor)
						}
					}
					require.Equal(t, tc.indexes, idx)
					require.Equal(t, tc.minors, minors)
					var compute []int
					for _, d := range tr.ComputeDevices() {
						compute = append(compute, d.Index)
					}
					require.Equal(t, tc.compute, compute)
				}
				require.Equal(t, "/dev/xpuctrl", tr.Ctrl)
				checkNodes(t, tr, tc.mode, 0, 0)
				checkProcAndSysfs(t, tr)
				checkLinks(t, tr.Root)
				checkLibraries(t, tr)
				checkMarker(t, tr)
				tc.check(t, tr)
			})
		}
	}
}

// checkProcAndSysfs checks the generic facts every shape shares.
func checkProcAndSysfs(t *testing.T, tr *Tree) {
	t.Helper()
	require.Contains(t, readTree(t, tr, "/proc/devices"), fmt.Sprintf("\n%3d xpu\n", tr.Major))
	if tr.Host.XRE5() {
		checkProcAndSysfsXRE5(t, tr)
		return
	}
	require.Equal(t, "jiffies: 4294968231\n", readTree(t, tr, "/proc/xpu/load_time"))
	require.Equal(t, fmt.Sprintf("%d:128\n", tr.Major), readTree(t, tr, "/sys/class/xpu/xpuctrl/dev"))
	require.Equal(t, tr.DriverVersion+"\n", readTree(t, tr, "/sys/module/kunlun/version"))
	for _, d := range tr.Devices {
		dir := fmt.Sprintf("/proc/xpu/dev%d/", d.Index)
		if d.HasProc {
			info := readTree(t, tr, dir+"info")
			require.Contains(t, info, "DeviceAddr:")
			require.Contains(t, info, d.BDF)
			require.Contains(t, info, d.Serial)
			require.Equal(t, d.State+"\n", readTree(t, tr, dir+"state"))
			st, err := os.Stat(tr.Path(dir + "info"))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o666), st.Mode().Perm(), "proc entries are created 0666")
		}
		class := fmt.Sprintf("/sys/class/xpu/xpu%d", d.Index)
		if !d.HasSysfs {
			continue
		}
		require.Equal(t, fmt.Sprintf("%d:%d\n", d.Major, d.Minor), readTree(t, tr, class+"/dev"))
		require.Equal(t, fmt.Sprintf("MAJOR=%d\nMINOR=%d\nDEVNAME=xpu%d\nDEVMODE=0666\n", d.Major, d.Minor, d.Index),
			readTree(t, tr, class+"/uevent"))
		require.Equal(t, "0x1d22\n", readTree(t, tr, class+"/device/vendor"))
		require.Equal(t, fmt.Sprintf("0x%04x\n", d.DeviceID), readTree(t, tr, class+"/device/device"))
		drv, err := filepath.EvalSymlinks(tr.Path(class + "/device/driver"))
		require.NoError(t, err)
		require.Equal(t, tr.Path("/sys/bus/pci/drivers/kunlun"), drv)
		real, err := filepath.EvalSymlinks(tr.Path(class))
		require.NoError(t, err)
		require.Equal(t, tr.Path(d.SysfsPath), real)
		require.True(t, strings.HasSuffix(filepath.Dir(filepath.Dir(real)), "/"+d.BDF))
	}
}

// checkProcAndSysfsXRE5 checks what driver 5.x hosts have instead:
// /proc/kunlun/devN, modules kunlun and kunlun_peermem, PCI functions bound
// to kunlun, and neither /proc/xpu nor /sys/class/xpu.
func checkProcAndSysfsXRE5(t *testing.T, tr *Tree) {
	t.Helper()
	require.False(t, exists(tr, "/proc/xpu"))
	require.False(t, exists(tr, "/sys/class/xpu"))
	require.False(t, exists(tr, "/sys/devices/virtual/xpu"))
	require.Equal(t, "live\n", readTree(t, tr, "/sys/module/kunlun/initstate"))
	require.Equal(t, "live\n", readTree(t, tr, "/sys/module/kunlun_peermem/initstate"))
	class := tr.Host.NodeClass
	for _, d := range tr.Devices {
		require.False(t, d.HasProc, "xpu%d", d.Index)
		require.Equal(t, class != "", d.HasSysfs, "xpu%d: a class device only with a node class", d.Index)
		require.Equal(t, class != "" && tr.Host.SysDevChar, d.DevChar != "", "xpu%d", d.Index)
		if d.HasSysfs {
			checkClassDevice(t, tr, d, "/sys/class/"+class+fmt.Sprintf("/xpu%d", d.Index))
		}
		if d.DevChar != "" {
			require.Equal(t, fmt.Sprintf("/sys/dev/char/%d:%d", d.Major, d.Minor), d.DevChar)
			checkClassDevice(t, tr, d, d.DevChar)
		}
		require.Equal(t, "0x0\n", readTree(t, tr, fmt.Sprintf("/proc/kunlun/dev%d/dma_excp_mask", d.Index)))
		fn := "/sys/bus/pci/drivers/kunlun/" + d.BDF
		require.Equal(t, fmt.Sprintf("0x%04x\n", d.DeviceID), readTree(t, tr, fn+"/device"))
		drv, err := filepath.EvalSymlinks(tr.Path(fn + "/driver"))
		require.NoError(t, err)
		require.Equal(t, tr.Path("/sys/bus/pci/drivers/kunlun"), drv)
	}
}

// checkClassDevice checks that the in-tree link entry leads to d's class
// device, under d's PCI function, with its number.
func checkClassDevice(t *testing.T, tr *Tree, d TreeDevice, entry string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(tr.Path(entry))
	require.NoError(t, err)
	require.Equal(t, tr.Path(d.SysfsPath), real)
	require.Equal(t, fmt.Sprintf("%d:%d\n", d.Major, d.Minor), readTree(t, tr, entry+"/dev"))
	fn, err := filepath.EvalSymlinks(tr.Path(entry + "/device"))
	require.NoError(t, err)
	require.Equal(t, d.BDF, filepath.Base(fn))
	require.Equal(t, fmt.Sprintf("%d\n", d.NUMANode), readTree(t, tr, entry+"/device/numa_node"))
}

// checkLinks walks the tree: every link is relative and resolves inside it.
func checkLinks(t *testing.T, root string) {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		require.NoError(t, err)
		if de.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		n++
		target, err := os.Readlink(p)
		require.NoError(t, err)
		require.False(t, filepath.IsAbs(target), "%s -> %s is absolute", p, target)
		resolved, err := filepath.EvalSymlinks(p)
		require.NoError(t, err, "%s -> %s dangles", p, target)
		require.True(t, within(root, resolved), "%s resolves outside the tree to %s", p, resolved)
		return nil
	}))
	require.NotZero(t, n)
}

func checkMarker(t *testing.T, tr *Tree) {
	t.Helper()
	var got Tree
	require.NoError(t, json.Unmarshal([]byte(readTree(t, tr, "/"+MarkerFile)), &got))
	require.Equal(t, tr.Devices, got.Devices)
	require.Equal(t, tr.Libraries, got.Libraries)
}

func TestKnobs(t *testing.T) {
	cases := []struct {
		description string
		tweak       func(h *Host)
		check       func(t *testing.T, tr *Tree)
	}{
		{"no xpuctrl", func(h *Host) { h.NoCtrl = true }, func(t *testing.T, tr *Tree) {
			require.Empty(t, tr.Ctrl)
			require.False(t, exists(tr, "/dev/xpuctrl"))
			require.False(t, exists(tr, "/sys/class/xpu/xpuctrl"))
			require.True(t, exists(tr, "/dev/xpu0"))
		}},
		{"module loaded, no nodes", func(h *Host) { h.NoNodes = true }, func(t *testing.T, tr *Tree) {
			entries, err := os.ReadDir(tr.Path("/dev"))
			require.NoError(t, err)
			require.Empty(t, entries)
			require.True(t, exists(tr, "/proc/xpu/dev0/info"))
			require.True(t, exists(tr, "/sys/class/xpu/xpu0/dev"))
			require.Empty(t, tr.ComputeDevices())
		}},
		{"no sysfs", func(h *Host) { h.NoSysfs = true }, func(t *testing.T, tr *Tree) {
			require.False(t, exists(tr, "/sys"))
			require.True(t, exists(tr, "/proc/xpu/version"))
		}},
		{"no procfs", func(h *Host) { h.NoProcfs = true }, func(t *testing.T, tr *Tree) {
			require.False(t, exists(tr, "/proc"))
			require.True(t, exists(tr, "/sys/class/xpu/xpu0"))
		}},
		{"no driver files", func(h *Host) { h.NoDriver = true }, func(t *testing.T, tr *Tree) {
			require.False(t, exists(tr, "/usr"))
			require.False(t, exists(tr, LdCachePath))
			require.False(t, exists(tr, LdSoConfPath))
			require.Empty(t, tr.Libraries)
		}},
		{"custom major", func(h *Host) { h.Major = 239 }, func(t *testing.T, tr *Tree) {
			devices := readTree(t, tr, "/proc/devices")
			require.Contains(t, devices, "\n239 xpu\n")
			require.NotContains(t, devices, "ttyDBC", "the colliding major was replaced")
			require.Equal(t, "239:0\n", readTree(t, tr, "/sys/class/xpu/xpu0/dev"))
			checkNodes(t, tr, 0o666, 0, 0)
		}},
		{"custom XRE version", func(h *Host) { h.XREVersion = "5.0.21.99" }, func(t *testing.T, tr *Tree) {
			require.True(t, exists(tr, "/usr/local/xpu-5.0.21.99/lib64/libxpurt.so.1"))
			target, err := os.Readlink(tr.Path(XRELink))
			require.NoError(t, err)
			require.Equal(t, "xpu-5.0.21.99", target)
			require.Equal(t, "5.0.21.21\n", readTree(t, tr, "/proc/xpu/version"), "driver version is separate")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.description, func(t *testing.T) {
			h := P800x8()
			tc.tweak(&h)
			tr := build(t, h)
			checkNodes(t, tr, 0o666, 0, 0)
			tc.check(t, tr)
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		description string
		tweak       func(h *Host)
		want        string
	}{
		{"repeated index", func(h *Host) { h.Devices[1].Index = 0 }, "repeated"},
		{"minor collision", func(h *Host) { h.Devices[1].Minor = 0 }, "minor 0 already used"},
		{"minor of xpuctrl", func(h *Host) { h.Devices[1].Minor = CtrlMinor }, "minor 128 already used"},
		{"orphan VF", func(h *Host) { h.Devices[2].PhysFn = "0000:99:00.0" }, "not a device of the host"},
		{"zero major", func(h *Host) { h.Major = 0 }, "major"},
		{"bad XRE version", func(h *Host) { h.XREVersion = "../x" }, "XRE version"},
		{"repeated library", func(h *Host) { h.Libraries = append(h.Libraries, h.Libraries[2]) }, "repeated"},
		{"long SONAME", func(h *Host) { h.Libraries[2].SONAME = strings.Repeat("l", 200) }, "longer than"},
	}
	for _, tc := range cases {
		t.Run(tc.description, func(t *testing.T) {
			h := R200SRIOV()
			tc.tweak(&h)
			_, err := Build(t.TempDir(), h)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := Build("/", P800x8())
	require.ErrorContains(t, err, "refusing")
}

func TestRelocatable(t *testing.T) {
	tr := build(t, R200SRIOV(), WithoutMknod())
	moved := filepath.Join(t.TempDir(), "moved")
	require.NoError(t, os.Rename(tr.Root, moved))
	checkLinks(t, moved)
	b, err := os.ReadFile(filepath.Join(moved, "sys/class/xpu/xpu3/device/physfn/sriov_numvfs"))
	require.NoError(t, err)
	require.Equal(t, "3\n", string(b))
}

func TestShapeByName(t *testing.T) {
	for _, name := range Shapes() {
		h, err := ShapeByName(name, 3, 7)
		require.NoError(t, err)
		require.Equal(t, name, h.Shape)
	}
	h, err := ShapeByName(ShapeScaled, 3, 7)
	require.NoError(t, err)
	require.Len(t, h.Devices, 3)
	require.Len(t, h.Libraries, 7)
	_, err = ShapeByName("p900", 0, 0)
	require.ErrorContains(t, err, "p800x8")
}

func BenchmarkBuildScaled256x500(b *testing.B) {
	h := Scaled(256, 500)
	_, err := Build(b.TempDir(), h) // compile the templates outside the timer
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		root := filepath.Join(b.TempDir(), "h")
		if _, err := Build(root, h); err != nil {
			b.Fatal(err)
		}
	}
}
