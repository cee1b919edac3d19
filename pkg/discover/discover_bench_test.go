package discover_test

import (
	"fmt"
	"testing"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// benchSizes are the fake hosts the benchmarks read: devices x library files.
var benchSizes = []struct{ devices, libraries int }{{1, 10}, {8, 10}, {8, 500}, {256, 10}, {256, 500}}

// benchTree builds a scaled fake host on tmpfs when there is one: on the
// shared disk a 256x500 tree takes seconds.
func benchTree(b *testing.B, devices, libraries int) *fakehost.Tree {
	b.Helper()
	return fakehosttest.BuildOnTmpfs(b, fakehost.Scaled(devices, libraries))
}

// BenchmarkDiscover reads whole scaled hosts: device nodes, /proc/xpu,
// sysfs and the driver's files.
func BenchmarkDiscover(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("devices=%d/libs=%d", size.devices, size.libraries), func(b *testing.B) {
			tree := benchTree(b, size.devices, size.libraries)
			opts := tree.DiscoverOptions()
			b.ReportAllocs()
			for b.Loop() {
				h, err := discover.Discover(opts...)
				if err != nil {
					b.Fatal(err)
				}
				if got := len(h.ComputeDevices()); got != size.devices {
					b.Fatalf("discovered %d compute devices, want %d", got, size.devices)
				}
			}
		})
	}
}
