package partition

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// apply --output against the fake SR-IOV kernel: the layout changes and
// the spec is rewritten with the new VFs, by generate's code.
func TestApplyRewritesSpec(t *testing.T) {
	tree := clitest.FakeTree(t, fakehost.P800SRIOV())
	k := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{})
	spec := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	_, _, err := clitest.Run(t, generate.NewCommand, "generate", "--host-root", tree.Root, "--output", spec)
	require.NoError(t, err)
	before, err := os.ReadFile(spec)
	require.NoError(t, err)

	out, logs, err := run(t, "apply", "--host-root", tree.Root, "--layout", "3=4", "--output", spec, "--json")
	require.NoError(t, err, logs)
	var rep sriov.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, []int{4}, rep.Cards[1].Writes)
	require.Equal(t, 4, k.NumVFs("0000:83:00.0"))
	require.Contains(t, logs, "wrote CDI spec "+spec)

	out, _, err = run(t, "show", "--host-root", tree.Root, "--json")
	require.NoError(t, err)
	var s partition.Status
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Len(t, s.Cards[1].VFs, 4)

	data, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.NotEqual(t, string(before), string(data))
	parsed, err := cdispec.Parse(data)
	require.NoError(t, err)
	names := map[string][]string{}
	for _, d := range parsed.Devices {
		for _, n := range d.ContainerEdits.DeviceNodes {
			names[d.Name] = append(names[d.Name], n.Path)
		}
	}
	for _, vf := range s.Cards[1].VFs {
		require.Equal(t, []string{vf.Node}, names[strconv.Itoa(vf.Index)], "VF %d is a device by index", vf.Index)
		require.Equal(t, []string{vf.Node}, names[vf.Address], "VF %d is a device by PCI address", vf.Index)
	}
	require.NotContains(t, names, "3", "the PF of a partitioned card is not offered")

	// Nothing changed: the spec is left as it is.
	st, err := os.Stat(spec)
	require.NoError(t, err)
	_, _, err = run(t, "apply", "--host-root", tree.Root, "--layout", "3=4", "--output", spec)
	require.NoError(t, err)
	st2, err := os.Stat(spec)
	require.NoError(t, err)
	require.Equal(t, st.ModTime(), st2.ModTime())
}
