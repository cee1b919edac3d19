package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
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

// TestInstallAppliesTheLayout runs install --once with a layout on a fake
// host under the fake SR-IOV kernel: the real apply writes sriov_numvfs
// through --host-root, the spec then names every VF, by index and by PCI
// address; a second run changes nothing; a layout the cards do not allow
// is refused and leaves them as they are.
func TestInstallAppliesTheLayout(t *testing.T) {
	hook := filepath.Join(t.TempDir(), "xpu-runtime-hook")
	tree := fakehosttest.Build(t, driverOnlyP800())
	k := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{})
	require.True(t, tree.RealNodes)
	cmd := exec.Command("go", "build", "-o", hook, "github.com/xpu-cdi/xpu-cdi/cmd/xpu-runtime-hook")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

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
