package install

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// driverOnlyP800 is P800SRIOV's box with both cards whole (no VF), as a
// node comes up after a reboot.
func driverOnlyP800() fakehost.Host {
	h := fakehost.P800SRIOV()
	var pfs []fakehost.Device
	for _, d := range h.Devices {
		if d.Function == fakehost.FunctionPF {
			pfs = append(pfs, d)
		}
	}
	h.Devices = pfs
	return h
}

// buildHook builds the static hook to install.
func buildHook(t *testing.T) string {
	t.Helper()
	hook := filepath.Join(t.TempDir(), "xpu-runtime-hook")
	cmd := exec.Command("go", "build", "-o", hook, "github.com/xpu-cdi/xpu-cdi/cmd/xpu-runtime-hook")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return hook
}

// TestInstallAppliesTheLayout runs install --once with a layout on a fake
// host under the fake SR-IOV kernel: the real apply writes sriov_numvfs
// through --host-root, the spec then names every VF, by index and by PCI
// address; a second run changes nothing; a layout the cards do not allow
// is refused and leaves them as they are.
func TestInstallAppliesTheLayout(t *testing.T) {
	tree := fakehosttest.Build(t, driverOnlyP800())
	k := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{})
	require.True(t, tree.RealNodes)
	hook := buildHook(t)

	flags := []string{"install", "--once", "--hook-source", hook, "--host-root", tree.Root, "--hook-dir", "/opt/xpu-cdi/bin", "--output", "/etc/cdi/baidu.com-xpu.yaml", "--pod-resources-socket", ""}
	logs, err := run(t, append(flags, "--partition-layout", "all=4")...)
	require.NoError(t, err, logs)
	require.Contains(t, logs, "the cards are laid out as all=4 (the installer's layout)")
	for _, pf := range k.PFs() {
		require.Equal(t, 4, k.NumVFs(pf), pf)
	}
	data, err := os.ReadFile(tree.Path("/etc/cdi/baidu.com-xpu.yaml"))
	require.NoError(t, err)
	spec, err := cdispec.Parse(data)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, d := range spec.Devices {
		names[d.Name] = true
	}
	for _, vf := range []string{"0000:03:00.1", "0000:03:00.4", "0000:83:00.1", "0000:83:00.4"} {
		require.True(t, names[vf], "VF %s in the spec: %v", vf, names)
	}
	require.False(t, names["0000:03:00.0"], "a PF with VFs is not offered")
	writes := len(k.Writes())

	logs, err = run(t, append(flags, "--partition-layout", "all=4")...)
	require.NoError(t, err, logs)
	require.Len(t, k.Writes(), writes, "already laid out: nothing written")

	// Under the chart a kubelet always runs: a PodResources socket that
	// is not there is an error, not "no pods", and nothing is written.
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	noSocket := append(append([]string{}, flags[:len(flags)-1]...), socket)
	logs, err = run(t, append(noSocket, "--partition-layout", "all=2")...)
	require.ErrorIs(t, err, partition.ErrNoPodResources, logs)
	require.ErrorContains(t, err, "no kubelet PodResources socket at "+socket)
	require.Len(t, k.Writes(), writes)

	logs, err = run(t, append(flags, "--partition-layout", "all=3")...)
	require.ErrorContains(t, err, "laying the cards out as all=3", logs)
	require.Len(t, k.Writes(), writes, "a refused layout writes nothing")
	for _, pf := range k.PFs() {
		require.Equal(t, 4, k.NumVFs(pf), pf)
	}
}

// TestInstallRefusesACardOpenedMidApply: the installer's apply checks each
// card's holders again right before its first write. all=4 over two whole
// cards under the fake SR-IOV kernel, the first card's udev slow (2 s): as
// soon as the first card's write is seen, a process opens the second
// card's PF node; the second card is refused naming it, and stays whole.
func TestInstallRefusesACardOpenedMidApply(t *testing.T) {
	const first, second = "0000:03:00.0", "0000:83:00.0"
	tree := fakehosttest.Build(t, driverOnlyP800())
	k := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{SlowUdevDelay: 2 * time.Second})
	hook := buildHook(t)
	h, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	node := ""
	for _, d := range h.Devices {
		if d.PCI != nil && d.PCI.Address == second {
			node = d.Node.Path
		}
	}
	require.NotEmpty(t, node)
	k.FailNext(first, fakehost.FaultSlowUdev)

	opened := make(chan error, 1)
	go func() {
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			for _, w := range k.Writes() {
				if w.PF == first {
					opened <- fakehost.FakeOpenFD(tree.Root, 4444, 3, node)
					return
				}
			}
		}
		opened <- errors.New("the first card was never written")
	}()
	logs, err := run(t, "install", "--once", "--hook-source", hook, "--host-root", tree.Root, "--hook-dir", "/opt/xpu-cdi/bin",
		"--output", "/etc/cdi/baidu.com-xpu.yaml", "--pod-resources-socket", "", "--partition-layout", "all=4")
	require.NoError(t, <-opened)
	require.ErrorIs(t, err, sriov.ErrInUse, logs)
	require.ErrorContains(t, err, "("+second+"): card in use: opened during the apply by pid 4444 ("+fakehost.FakeProcessComm+") holding "+node)
	require.Equal(t, 4, k.NumVFs(first))
	require.Equal(t, 0, k.NumVFs(second))
	for _, w := range k.Writes() {
		require.NotEqual(t, second, w.PF, "the card opened meanwhile is not written")
	}
}
