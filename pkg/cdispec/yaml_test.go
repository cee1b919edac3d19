package cdispec_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// requireRoundTrip checks that data, the encoding of spec, is read back by
// the CDI library exactly as runtimes read spec files (strict parsing and
// validation, ReadSpec) and by the YAML library, and gives spec again.
func requireRoundTrip(t *testing.T, spec *specs.Spec, data []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	loaded, err := cdiapi.ReadSpec(path, 0)
	require.NoError(t, err, "the CDI library must load:\n%s", data)
	want, err := json.Marshal(spec)
	require.NoError(t, err)
	got, err := json.Marshal(loaded.Spec)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))

	var viaYAML specs.Spec
	require.NoError(t, yaml.Unmarshal(data, &viaYAML))
	got, err = json.Marshal(&viaYAML)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))
}

func TestYAMLRoundTripEveryShape(t *testing.T) {
	for _, h := range []fakehost.Host{fakehost.P800x8(), fakehost.R200SRIOV(), fakehost.K200(), fakehost.Degraded(), fakehost.Scaled(64, 20)} {
		t.Run(h.Shape, func(t *testing.T) {
			_, host := discoverShape(t, h)
			spec, _, err := cdispec.New(host, cdispec.Settings{})
			require.NoError(t, err)
			data, err := cdispec.Encode(spec, cdispec.FormatYAML)
			require.NoError(t, err)
			requireRoundTrip(t, spec, data)
		})
	}
}

// TestYAMLScalars covers the strings YAML would read as something else.
func TestYAMLScalars(t *testing.T) {
	awkward := []string{
		"0", "1.0", "0.5.0", "0000:3b:00.0", "true", "False", "yes", "NO", "on", "off", "y", "n", "null", "Null", "~",
		"", " ", "a: b", "a:", "#x", "a #x", "- x", "-x", "[x]", "{x}", "*x", "&x", "!x", "|x", ">x", "%x", "@x", "`x",
		"'x'", "\"x\"", "x\ny", "tab\there", "\\", "é", "\u2028", ".inf", ".nan", "0x1F", "0o17", "1e3", "+1", "=", "a=b=c",
		"/dev/xpu0", "libxpurt.so.1::/usr/local/xpu/lib64/libxpurt.so", "XPU_CDI_DEVICE_0=0000:01:00.0", "PATH=/usr/bin:/bin",
	}
	spec := &specs.Spec{Version: "0.5.0", Kind: "example.com/x", Devices: []specs.Device{{
		Name:           "d",
		ContainerEdits: specs.ContainerEdits{Env: awkward},
	}}}
	data, err := cdispec.Encode(spec, cdispec.FormatYAML)
	require.NoError(t, err)
	var back specs.Spec
	require.NoError(t, yaml.Unmarshal(data, &back), "%s", data)
	require.Equal(t, awkward, back.Devices[0].ContainerEdits.Env, "%s", data)
}

// TestYAMLRepeatedScalars covers the encoder's memory of short strings:
// repeats, and strings whose JSON escapes spell another string.
func TestYAMLRepeatedScalars(t *testing.T) {
	twins := []string{`a"b`, `a\"b`, `a\b`, `a\\b`, `\`, `\\`, "\n", "\\n", "x\ny", "true", "True", "ro", "0", "ro"}
	env := append(append([]string{}, twins...), twins...)
	spec := &specs.Spec{Version: "0.5.0", Kind: "example.com/x", Devices: []specs.Device{{
		Name:           "d",
		ContainerEdits: specs.ContainerEdits{Env: env, Hooks: []*specs.Hook{{HookName: "x", Path: "/p", Args: twins}}},
	}}}
	data, err := cdispec.Encode(spec, cdispec.FormatYAML)
	require.NoError(t, err)
	var back specs.Spec
	require.NoError(t, yaml.Unmarshal(data, &back), "%s", data)
	require.Equal(t, env, back.Devices[0].ContainerEdits.Env, "%s", data)
	require.Equal(t, twins, back.Devices[0].ContainerEdits.Hooks[0].Args, "%s", data)
}

func FuzzYAMLString(f *testing.F) {
	for _, s := range []string{"0", "a: b", "x\ny", "true", "/dev/xpu0", "é", "\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec := &specs.Spec{Version: "0.3.0", Kind: "example.com/x", Devices: []specs.Device{{
			Name:           "d",
			ContainerEdits: specs.ContainerEdits{Env: []string{s}, Hooks: []*specs.Hook{{HookName: "x", Path: "/p", Args: []string{s, s}}}},
		}}}
		data, err := cdispec.Encode(spec, cdispec.FormatYAML)
		require.NoError(t, err)
		want, err := json.Marshal(spec) // JSON replaces invalid UTF-8 the same way
		require.NoError(t, err)
		var back specs.Spec
		require.NoError(t, yaml.Unmarshal(data, &back), "%q -> %s", s, data)
		got, err := json.Marshal(&back)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got), "%q -> %s", s, data)
	})
}

func TestValidateSpecRefuses(t *testing.T) {
	good := func() *specs.Spec {
		return &specs.Spec{Version: "0.5.0", Kind: "baidu.com/xpu", Devices: []specs.Device{{
			Name: "0", ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{{Path: "/dev/xpu0", HostPath: "/dev/xpu0"}}},
		}}}
	}
	require.NoError(t, cdispec.ValidateSpec(good()))
	for _, tc := range []struct {
		description string
		breakIt     func(*specs.Spec)
		wantErr     string
	}{
		{"version too low for the content", func(s *specs.Spec) { s.Version = "0.3.0" }, "at least v0.5.0"},
		{"unknown version", func(s *specs.Spec) { s.Version = "9.9.9" }, "invalid version"},
		{"bad vendor", func(s *specs.Spec) { s.Kind = "-x/xpu" }, "invalid CDI spec kind"},
		{"bad device name", func(s *specs.Spec) { s.Devices[0].Name = "a b" }, `device "a b"`},
		{"duplicate name", func(s *specs.Spec) { s.Devices = append(s.Devices, s.Devices[0]) }, `multiple devices "0"`},
		{"no devices", func(s *specs.Spec) { s.Devices = nil }, "no devices"},
		{"device without edits", func(s *specs.Spec) { s.Devices[0].ContainerEdits = specs.ContainerEdits{} }, "has no edits"},
		{"empty node path", func(s *specs.Spec) { s.Devices[0].ContainerEdits.DeviceNodes[0].Path = "" }, "invalid"},
		{"bad env", func(s *specs.Spec) { s.Devices[0].ContainerEdits.Env = []string{"=x"} }, "invalid"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			s := good()
			tc.breakIt(s)
			require.ErrorContains(t, cdispec.ValidateSpec(s), tc.wantErr)
			// The library's own loader agrees that the spec is invalid.
			data, err := cdispec.Encode(s, cdispec.FormatYAML)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "s.yaml")
			require.NoError(t, os.WriteFile(path, data, 0o644))
			_, err = cdiapi.ReadSpec(path, 0)
			require.Error(t, err)
		})
	}
}
