package cdispec_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

func TestSettingsOptions(t *testing.T) {
	_, host := discoverShape(t, fakehost.P800x8())
	build := func(opts ...cdispec.Option) string {
		t.Helper()
		spec, _, err := cdispec.New(host, opts...)
		require.NoError(t, err)
		data, err := cdispec.Encode(spec, cdispec.FormatYAML)
		require.NoError(t, err)
		return string(data)
	}
	for _, tc := range []struct {
		name     string
		settings cdispec.Settings
		want     []cdispec.Option
	}{
		{name: "zero value is the default spec plus the default hook", settings: cdispec.Settings{}, want: []cdispec.Option{cdispec.WithRuntimeHooks(cdispec.DefaultHookPath)}},
		{name: "no hooks is New's default", settings: cdispec.Settings{NoHooks: true}, want: nil},
		{
			name:     "every setting",
			settings: cdispec.Settings{Vendor: "example.com", Class: "acc", NameStrategies: []cdispec.NameStrategy{cdispec.NameByBDF}, NodesOnly: true, NoAllDevice: true, HookPath: "/opt/hook"},
			want: []cdispec.Option{
				cdispec.WithKind("example.com", "acc"), cdispec.WithNameStrategies(cdispec.NameByBDF), cdispec.WithDriverFiles(false),
				cdispec.WithAllDevice(false), cdispec.WithRuntimeHooks("/opt/hook"),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, build(tc.want...), build(tc.settings.Options()...))
		})
	}
}
