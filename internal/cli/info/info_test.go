package info_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/info"
	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func run(t *testing.T, root string, args ...string) (string, string, error) {
	t.Helper()
	return clitest.Run(t, info.NewCommand, append(append([]string{"info"}, args...), clitest.Roots(root)...)...)
}

func TestInfoJSON(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.Degraded())
	stdout, _, err := run(t, root, "--json")
	require.NoError(t, err)
	require.True(t, json.Valid([]byte(stdout)), stdout)
	require.Contains(t, stdout, `"index": 3`)
	require.Contains(t, stdout, `"state": "ERROR"`)
	require.Contains(t, stdout, `"model": "unknown"`)
	require.Contains(t, stdout, `xpu-smi not found`)
	text, _, err := run(t, root)
	require.NoError(t, err)
	require.Contains(t, text, "Problems:")
}

// TestInfoXRE5 runs info on the P800 (driver and XRE 5) host: one note per
// host-wide fact, nothing logged, no problem.
func TestInfoXRE5(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800XRE5())
	text, logs, err := run(t, root)
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
}

// TestInfoPrintsProblemsOnce checks that a host's warnings appear once,
// under Problems, and not also on the log.
func TestInfoPrintsProblemsOnce(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.Degraded())
	text, logs, err := run(t, root)
	require.NoError(t, err)
	require.NotContains(t, logs, "xpu-smi not found")
	require.Equal(t, 1, strings.Count(text, "xpu-smi not found"), text)
}

// TestInfoWithoutXPU: the error says where it looked and carries the hint
// main prints.
func TestInfoWithoutXPU(t *testing.T) {
	empty := t.TempDir()
	stdout, _, err := run(t, empty)
	require.ErrorIs(t, err, discover.ErrNoDevices)
	require.ErrorContains(t, err, "no Kunlun XPU found under "+empty)
	var hint *cmdflags.HintError
	require.True(t, errors.As(err, &hint))
	require.Contains(t, hint.Hint, "lsmod | grep kunlun")
	require.Empty(t, stdout)
}

// TestInfoP800Sysfs: on the P800 host whose nodes are found through
// /sys/dev/char, info and info --json give each node the PCI address, model
// and NUMA node of its own function, not those of its place in address
// order; a bound function without a node and a node whose function is not
// bound are problems.
func TestInfoP800Sysfs(t *testing.T) {
	host := fakehost.P800Sysfs()
	host.Devices[6].NoNode = true // 0000:83:00.0
	root := clitest.FakeHost(t, host)
	require.NoError(t, os.Remove(filepath.Join(root, "sys/bus/pci/drivers/kunlun/0000:84:00.0"))) // xpu2's

	text, logs, err := run(t, root)
	require.NoError(t, err)
	require.Empty(t, logs)
	require.Regexp(t, `(?m)^0 +/dev/xpu0 +195:0 +0000:82:00\.0 +P800 +pf +- +- +1 +yes$`, text)
	require.Regexp(t, `(?m)^3 +/dev/xpu3 +195:3 +0000:01:00\.0 +P800 +pf +- +- +0 +yes$`, text)
	require.NotContains(t, text, "no PCI address")
	require.Contains(t, text, "Problems:\n")
	require.Contains(t, text, "/dev/xpu2: sysfs: PCI function 0000:84:00.0 is not bound to the kunlun driver")
	require.Contains(t, text, "PCI functions bound to the kunlun driver with no /dev/xpuN node: 0000:83:00.0;")

	stdout, _, err := run(t, root, "--json")
	require.NoError(t, err)
	var v struct {
		Devices []struct {
			Index      int    `json:"index"`
			PCIAddress string `json:"pciAddress"`
			PCIeRoot   string `json:"pcieRoot"`
			Model      string `json:"model"`
			NUMANode   *int   `json:"numaNode"`
			Function   string `json:"function"`
		} `json:"devices"`
		Warnings []string `json:"warnings"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &v))
	require.Len(t, v.Devices, 7)
	for _, d := range v.Devices {
		want := host.Devices[d.Index]
		require.Equal(t, want.BDF, d.PCIAddress, "xpu%d", d.Index)
		require.Equal(t, "P800", d.Model)
		require.Equal(t, "pf", d.Function)
		require.NotNil(t, d.NUMANode)
		require.Equal(t, want.NUMANode, *d.NUMANode, "xpu%d", d.Index)
		require.Equal(t, "pci0000:"+map[int]string{0: "00", 1: "80"}[want.NUMANode], d.PCIeRoot)
	}
	require.Len(t, v.Warnings, 1)
}

// TestInfoFacts: info --json gives the facts the labels and the DRA
// attributes publish (discover.Host.FactsOf): a P800 VF on driver 5.x is
// Kunlun3 with half the card's memory; a K200's family is its generation,
// not procfs's board name.
func TestInfoFacts(t *testing.T) {
	type facts struct {
		XREVersion string `json:"xreVersion"`
		Devices    []struct {
			Index         int    `json:"index"`
			Model         string `json:"model"`
			Family        string `json:"family"`
			MemoryMiB     int64  `json:"memoryMiB"`
			DriverVersion string `json:"driverVersion"`
		} `json:"devices"`
	}
	read := func(h fakehost.Host) facts {
		stdout, _, err := run(t, clitest.FakeHost(t, h), "--json")
		require.NoError(t, err)
		var v facts
		require.NoError(t, json.Unmarshal([]byte(stdout), &v))
		return v
	}
	v := read(fakehost.P800SRIOV())
	require.Equal(t, fakehost.XREVersionP800, v.XREVersion)
	require.Len(t, v.Devices, 4)
	require.Equal(t, "P800", v.Devices[0].Model)
	require.Equal(t, int64(98304), v.Devices[0].MemoryMiB)
	for _, d := range v.Devices[1:3] {
		require.Equal(t, "P800 VF", d.Model, "xpu%d", d.Index)
		require.Equal(t, discover.GenerationKunlun3, d.Family, "xpu%d", d.Index)
		require.Equal(t, int64(49152), d.MemoryMiB, "xpu%d", d.Index)
	}
	v = read(fakehost.K200())
	require.Equal(t, discover.GenerationKunlun1, v.Devices[0].Family)
	require.Equal(t, fakehost.DriverVersionKunlun2, v.Devices[0].DriverVersion)
	require.Zero(t, v.Devices[0].MemoryMiB)
}

// TestInfoEscapesHostText: escape sequences in the host's procfs files
// reach the terminal escaped (discover.CleanText), never raw.
func TestInfoEscapesHostText(t *testing.T) {
	tree := clitest.FakeTree(t, fakehost.R200SRIOV())
	info := tree.Path("/proc/xpu/dev0/info")
	data, err := os.ReadFile(info)
	require.NoError(t, err)
	require.NoError(t, os.Remove(info))
	require.NoError(t, os.WriteFile(info, []byte(strings.Replace(string(data), "DeviceSN:", "DeviceSN:\x1b]0;owned\x07\x1b[2J", 1)), 0o444))
	state := tree.Path("/proc/xpu/dev1/state")
	require.NoError(t, os.Remove(state))
	require.NoError(t, os.WriteFile(state, []byte("ERROR\x1b[8m\nRUNNING\n"), 0o444))
	for _, tc := range []struct {
		args []string
		bs   string // a backslash as the output writes it
	}{{nil, `\`}, {[]string{"--json"}, `\\`}} {
		stdout, stderr, err := run(t, tree.Root, tc.args...)
		require.NoError(t, err)
		require.NotContains(t, stdout+stderr, "\x1b", "no raw escape character")
		require.NotContains(t, stdout+stderr, "\x07")
		require.Contains(t, stdout, tc.bs+`x1b]0;owned`)
		require.Contains(t, stdout, `ERROR`+tc.bs+`x1b[8m`)
	}
}

// TestInfoPartitions: on SR-IOV hosts info shows the layout, per card its
// VFs now, the counts allowed and the partition size, and the handle
// budget; a host without SR-IOV has no such section.
func TestInfoPartitions(t *testing.T) {
	text, _, err := run(t, clitest.FakeHost(t, fakehost.P800SRIOV()))
	require.NoError(t, err)
	require.Contains(t, text, "Partitions (SR-IOV): layout 0=2,3=0\n")
	require.Regexp(t, `\n  0 +0000:03:00\.0 +P800 +2 +0,2,4 +2 x 48gb \(1/2\)\n`, text)
	require.Regexp(t, `\n  3 +0000:83:00\.0 +P800 +0 +0,2,4 +whole \(96gb\)\n`, text)
	require.Contains(t, text, "  handles: 4 used of 32 (every PF and every VF takes one)\n")

	text, _, err = run(t, clitest.FakeHost(t, fakehost.R200SRIOV()))
	require.NoError(t, err)
	require.Contains(t, text, "Partitions (SR-IOV): layout 0=3,1=0\n")
	require.Regexp(t, `\n  0 +0000:3b:00\.0 +R200 +3 +0,1,2,3 +3 x 5gb \(1/3\)\n`, text)
	require.Contains(t, text, "  handles: 5 used (every PF and every VF takes one; no public limit for this driver)\n")

	out, _, err := run(t, clitest.FakeHost(t, fakehost.P800SRIOV()), "--json")
	require.NoError(t, err)
	var v struct {
		Partitions struct {
			Layout      string `json:"layout"`
			HandlesUsed int    `json:"handlesUsed"`
			HandleLimit int    `json:"handleLimit"`
			Cards       []struct {
				NumVFs  int    `json:"numVFs"`
				Allowed []int  `json:"allowed"`
				Size    string `json:"size"`
			} `json:"cards"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	require.Equal(t, "0=2,3=0", v.Partitions.Layout)
	require.Equal(t, 32, v.Partitions.HandleLimit)
	require.Len(t, v.Partitions.Cards, 2)
	require.Equal(t, []int{0, 2, 4}, v.Partitions.Cards[0].Allowed)
	require.Equal(t, "48gb", v.Partitions.Cards[0].Size)

	text, _, err = run(t, clitest.FakeHost(t, fakehost.P800x8()))
	require.NoError(t, err)
	require.NotContains(t, text, "Partitions (SR-IOV)")
	out, _, err = run(t, clitest.FakeHost(t, fakehost.P800x8()), "--json")
	require.NoError(t, err)
	require.NotContains(t, out, `"partitions"`)
}

// TestInfoHostRoot: --host-root reads the host below it, as generate and
// partition do, and is refused with --dev-root or --driver-root.
func TestInfoHostRoot(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800XRE5())
	byRoots, _, err := run(t, root)
	require.NoError(t, err)
	byHostRoot, _, err := clitest.Run(t, info.NewCommand, "info", "--host-root", root)
	require.NoError(t, err)
	require.Equal(t, byRoots, byHostRoot)
	require.Contains(t, byHostRoot, "Control node: /dev/xpuctrl 195:255 ")

	_, _, err = clitest.Run(t, info.NewCommand, "info", "--host-root", root, "--dev-root", root)
	require.ErrorContains(t, err, "--host-root "+root+" and --dev-root both say where the host is")
	missing := filepath.Join(t.TempDir(), "none")
	_, _, err = clitest.Run(t, info.NewCommand, "info", "--host-root", missing)
	require.ErrorContains(t, err, "--host-root "+missing+": ")
}
