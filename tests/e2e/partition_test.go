package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestPodmanPartition lays a card of a fake P800 host out in quarters with
// `xpu-cdi partition apply` against the fake SR-IOV kernel, which rewrites
// the spec, and gives one 24 GB partition to real Podman: the container
// sees exactly that VF's node (and the control node).
func TestPodmanPartition(t *testing.T) {
	tree := FakeHost(t, fakehost.P800SRIOV())
	k := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{})
	const pf = "0000:83:00.0"
	vendor := harness.UniqueVendor(t)
	specFile := filepath.Join(t.TempDir(), "spec.yaml")
	XPUCDI(t, "partition", "apply", "--dev-root", tree.Root, "--driver-root", tree.Root, "--layout", pf+"=4",
		"--output", specFile, "--vendor", vendor, "--hook-path", Binary(t, "xpu-runtime-hook"))
	require.Equal(t, 4, k.NumVFs(pf))

	var s partition.Status
	require.NoError(t, json.Unmarshal([]byte(XPUCDI(t, "partition", "show", "--dev-root", tree.Root, "--driver-root", tree.Root, "--json")), &s))
	var card partition.Card
	for _, c := range s.Cards {
		if c.Address == pf {
			card = c
		}
	}
	require.Len(t, card.VFs, 4)
	vf := card.VFs[2]
	require.Equal(t, int64(24576), vf.MemoryMiB)

	spec, err := os.ReadFile(specFile)
	require.NoError(t, err)
	p := harness.NewPodman(t)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	p.ImportImage(t, rootfs, "xpu-e2e-busybox")
	p.InstallSpec(t, spec, vendor)

	nodeOf := func(path string) string {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(tree.Path(path), &st))
		return fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	want := map[string]string{"/dev/xpuctrl": nodeOf("/dev/xpuctrl"), vf.Node: nodeOf(vf.Node)}
	for _, name := range []string{fmt.Sprint(vf.Index), vf.Address} {
		r := p.MustRun(t, "run", "--rm", "--device", vendor+"/xpu="+name, "xpu-e2e-busybox", "sh", "-c", listXPUs)
		nodes, env := parseNodes(t, r.Stdout)
		require.Equal(t, want, nodes, "by %s: exactly the VF's node and the control node", name)
		require.Equal(t, []string{fmt.Sprintf("XPU_CDI_DEVICE_%d=%s", vf.Index, vf.Address)}, env)
	}
}
