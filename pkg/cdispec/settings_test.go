package cdispec_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// TestSettingsDefaults: the zero value is the defaults spelt out.
func TestSettingsDefaults(t *testing.T) {
	_, host := discoverShape(t, fakehost.P800x8())
	build := func(s cdispec.Settings) string {
		t.Helper()
		spec, _, err := cdispec.New(host, s)
		require.NoError(t, err)
		data, err := cdispec.Encode(spec, cdispec.FormatYAML)
		require.NoError(t, err)
		return string(data)
	}
	require.Equal(t, build(cdispec.Settings{
		Vendor: cdispec.DefaultVendor, Class: cdispec.DefaultClass,
		NameStrategies: cdispec.AllStrategies, HookPath: cdispec.DefaultHookPath,
	}), build(cdispec.Settings{}))
}

// TestEverySetting changes every field from its default at once.
func TestEverySetting(t *testing.T) {
	tree, host := discoverShape(t, fakehost.P800x8())
	spec, _, err := cdispec.New(host, cdispec.Settings{
		Vendor: "example.com", Class: "acc", NameStrategies: []cdispec.NameStrategy{cdispec.NameByBDF},
		NodesOnly: true, NoAllDevice: true, HookPath: "/opt/hook",
	})
	require.NoError(t, err)
	require.Equal(t, "example.com/acc", spec.Kind)
	var names []string
	for _, d := range spec.Devices {
		names = append(names, d.Name)
	}
	var want []string
	for _, d := range tree.Devices {
		want = append(want, d.BDF)
	}
	require.ElementsMatch(t, want, names, "PCI-address names only, no all device")
	require.Empty(t, spec.ContainerEdits.Hooks, "nodes only: no libraries for a hook to set up")
	for _, m := range spec.ContainerEdits.Mounts {
		require.False(t, strings.Contains(m.ContainerPath, ".so"), "nodes only mounts no library: %s", m.ContainerPath)
	}
}

// TestSettingsKind: the kind a Settings builds, each part defaulted alone,
// and where the spec directory every engine reads keeps that kind's spec.
func TestSettingsKind(t *testing.T) {
	for _, tc := range []struct {
		settings cdispec.Settings
		kind     string
		path     string
	}{
		{cdispec.Settings{}, cdispec.DefaultKind, cdispec.DefaultSpecPath},
		{cdispec.Settings{Vendor: "example.com"}, "example.com/xpu", "/etc/cdi/example.com-xpu.yaml"},
		{cdispec.Settings{Class: "vxpu"}, "baidu.com/vxpu", "/etc/cdi/baidu.com-vxpu.yaml"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			require.Equal(t, tc.kind, tc.settings.Kind())
			require.Equal(t, tc.path, cdispec.SpecPath(tc.settings.Kind()))
		})
	}
	require.Equal(t, "/etc/cdi/baidu.com-xpu.yaml", cdispec.DefaultSpecPath)
	require.Equal(t, "/var/run/cdi/baidu.com-xpu.yaml", cdispec.LegacySpecPath)
}
