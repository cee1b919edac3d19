package cdi_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdi"
)

func TestSettingsOptions(t *testing.T) {
	_, host := discoverShape(t, fakehost.P800x8())
	build := func(opts ...cdi.Option) string {
		t.Helper()
		spec, _, err := cdi.New(host, opts...)
		require.NoError(t, err)
		data, err := cdi.Encode(spec, cdi.FormatYAML)
		require.NoError(t, err)
		return string(data)
	}
	for _, tc := range []struct {
		name     string
		settings cdi.Settings
		want     []cdi.Option
	}{
		{name: "zero value is the default spec plus the default hook", settings: cdi.Settings{}, want: []cdi.Option{cdi.WithRuntimeHooks(cdi.DefaultHookPath)}},
		{name: "no hooks is New's default", settings: cdi.Settings{NoHooks: true}, want: nil},
		{
			name:     "every setting",
			settings: cdi.Settings{Vendor: "example.com", Class: "acc", NameStrategies: []cdi.NameStrategy{cdi.NameByBDF}, NodesOnly: true, NoAllDevice: true, HookPath: "/opt/hook"},
			want: []cdi.Option{
				cdi.WithKind("example.com", "acc"), cdi.WithNameStrategies(cdi.NameByBDF), cdi.WithDriverFiles(false),
				cdi.WithAllDevice(false), cdi.WithRuntimeHooks("/opt/hook"),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, build(tc.want...), build(tc.settings.Options()...))
		})
	}
}
