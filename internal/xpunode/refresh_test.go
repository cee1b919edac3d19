package xpunode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// RefreshSpecDevices gives the node spec the devices of the host as it is
// now, under every name (the PCI-address names dynamic partitions answer
// with included), and keeps everything else its writer put in it: the
// common edits (control node, driver files, its hook path).
// A spec of another kind is not touched.
func TestRefreshSpecDevices(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.P800SRIOV())
	h, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	dir := t.TempDir()
	old, _, err := cdispec.New(h, cdispec.Settings{NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex}, NoAllDevice: true, HookPath: "/opt/xpu/hook", HostRoot: tree.Root})
	require.NoError(t, err)
	path := filepath.Join(dir, "baidu.com-xpu.yaml")
	require.NoError(t, cdispec.WriteFile(path, old, cdispec.FormatYAML))
	other := filepath.Join(dir, "example.com-gpu.json")
	otherSpec := `{"cdiVersion":"0.6.0","kind":"example.com/gpu","devices":[{"name":"0","containerEdits":{"env":["A=1"]}}]}`
	require.NoError(t, os.WriteFile(other, []byte(otherSpec), 0o644))
	before, _, err := NewSpecChecker("baidu.com/xpu", []string{dir}).Check(h)
	require.NoError(t, err)

	wrote, err := RefreshSpecDevices("baidu.com/xpu", []string{dir}, tree.Root, h)
	require.NoError(t, err)
	require.Equal(t, []string{path}, wrote)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	got, err := cdispec.Parse(data)
	require.NoError(t, err)
	require.Equal(t, old.ContainerEdits, got.ContainerEdits, "the common edits are the writer's")
	names, _, err := NewSpecChecker("baidu.com/xpu", []string{dir}).Check(h)
	require.NoError(t, err)
	for n := range before {
		require.True(t, names[n], "index name %s kept", n)
	}
	for _, d := range h.ComputeDevices() {
		require.True(t, names[d.Address()], "device %d named by its PCI address %s: %v", d.Index, d.Address(), names)
	}
	require.False(t, names[cdispec.AllDevice], "no all device: the old spec had none")
	data, err = os.ReadFile(other)
	require.NoError(t, err)
	require.Equal(t, otherSpec, string(data))
}

// Bad input changes nothing and says what was wrong: no node spec of the
// kind, a kind that is not vendor/class, a spec the host cannot fill.
func TestRefreshSpecDevicesErrors(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.P800SRIOV())
	h, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	dir := t.TempDir()
	_, err = RefreshSpecDevices("baidu.com/xpu", []string{dir}, tree.Root, h)
	require.ErrorIs(t, err, ErrNoNodeSpec)
	require.ErrorContains(t, err, "xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml")

	_, err = RefreshSpecDevices("no-class", []string{dir}, tree.Root, h)
	require.ErrorContains(t, err, `CDI kind "no-class"`)

	spec := "cdiVersion: 0.6.0\nkind: baidu.com/xpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    env: [\"A=1\"]\n"
	path := filepath.Join(dir, "baidu.com-xpu.yaml")
	require.NoError(t, os.WriteFile(path, []byte(spec), 0o644))
	_, err = RefreshSpecDevices("baidu.com/xpu", []string{dir}, tree.Root, &discover.Host{DevRoot: tree.Root})
	require.Error(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, spec, string(data), "a spec that cannot be refreshed is left as it was")
}
