package exporter

import (
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// facts are the device facts xpu_info carries.
type facts struct {
	Family, Serial, DriverVersion, XREVersion string
	MemoryBytes                               float64
}

// factsOf returns the facts of d as discovery read them.
func factsOf(h *discover.Host, d xpunode.Device) facts {
	x := d.XPU
	f := facts{Family: x.Family, Serial: x.Serial, DriverVersion: x.DriverVersion, MemoryBytes: float64(x.MemoryMiB << 20)}
	if f.DriverVersion == "" {
		f.DriverVersion = h.DriverVersion
	}
	return f
}
