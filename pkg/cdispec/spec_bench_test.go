package cdispec_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// benchSizes are the fake hosts: devices x library files.
var benchSizes = []struct{ devices, libraries int }{{1, 10}, {8, 10}, {8, 500}, {256, 10}, {256, 500}}

// benchHost discovers a scaled fake host built on tmpfs (when there is one)
// with plain files for nodes, so the result does not depend on root.
func benchHost(b *testing.B, devices, libraries int) *discover.Host {
	b.Helper()
	tree := fakehosttest.BuildOnTmpfs(b, fakehost.Scaled(devices, libraries), fakehost.WithoutMknod())
	host, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(b, err)
	return host
}

// BenchmarkNew builds the spec of a discovered host, with the hooks the
// generator emits by default.
func BenchmarkNew(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("devices=%d/libs=%d", size.devices, size.libraries), func(b *testing.B) {
			host := benchHost(b, size.devices, size.libraries)
			b.ReportAllocs()
			for b.Loop() {
				spec, _, err := cdispec.New(host, cdispec.Settings{})
				if err != nil {
					b.Fatal(err)
				}
				if len(spec.Devices) < size.devices+1 {
					b.Fatalf("spec has %d devices, want at least %d", len(spec.Devices), size.devices+1)
				}
			}
		})
	}
}

// BenchmarkEncode is the encoding `generate` writes (YAML by default, JSON
// with --format json).
func BenchmarkEncode(b *testing.B) {
	for _, size := range benchSizes {
		for _, f := range []cdispec.Format{cdispec.FormatYAML, cdispec.FormatJSON} {
			b.Run(fmt.Sprintf("devices=%d/libs=%d/%s", size.devices, size.libraries, f), func(b *testing.B) {
				host := benchHost(b, size.devices, size.libraries)
				spec, _, err := cdispec.New(host, cdispec.Settings{})
				require.NoError(b, err)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := cdispec.Encode(spec, f); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkValidate is the check `generate` makes of the spec before
// writing it: the CDI library's validators on the value.
func BenchmarkValidate(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("devices=%d/libs=%d", size.devices, size.libraries), func(b *testing.B) {
			host := benchHost(b, size.devices, size.libraries)
			spec, _, err := cdispec.New(host, cdispec.Settings{})
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if err := cdispec.ValidateSpec(spec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
