package exporter

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
)

// P800 x 8 with xpu-smi indices in another order than /dev/xpuN: each
// device's telemetry is the one of its PCI address.
func TestCollectP800(t *testing.T) {
	var want fakehost.Telemetry
	c, tr := hostCollector(t, fakehost.P800x8(), func(tr *fakehost.Tree, s *fakehost.XPUSMIState) {
		slices.Reverse(s.Devices) // xpu-smi index 0 is /dev/xpu7
		s.Devices[5].UsedMiB, s.Devices[5].Utilization, s.Devices[5].Temperature, s.Devices[5].Power = 1536, 42, 57, 123.5
		want = s.Devices[5]
	}, Config{})
	dev := tr.ComputeDevices()[2] // xpu-smi index 5 after the reversal
	require.Equal(t, want.BusID, dev.BDF)
	s := scrape(t, c)
	base := fmt.Sprintf(`model="P800",pci_bus_id="%s",xpu="2"`, dev.BDF)
	require.Equal(t, 1536.0*(1<<20), s[`xpu_memory_used_bytes{`+base+`}`], s)
	require.Equal(t, 98304.0*(1<<20), s[`xpu_memory_total_bytes{`+base+`}`])
	require.Equal(t, 0.42, s[`xpu_utilization_ratio{`+base+`}`])
	require.Equal(t, 57.0, s[`xpu_temperature_celsius{`+base+`}`])
	require.Equal(t, 123.5, s[`xpu_power_watts{`+base+`}`])
	require.Equal(t, 1.0, s[`xpu_healthy{`+base+`}`])
	require.Len(t, named(s, "xpu_healthy"), 8)
	require.Len(t, named(s, "xpu_memory_used_bytes"), 8)
	require.Len(t, named(s, "xpu_info", `family="Kunlun3"`, `xre_version="`+tr.XREVersion+`"`, `driver_version="`+tr.DriverVersion+`"`), 8, s)
	require.Equal(t, 1.0, value(t, s, `xpu_exporter_source_up{source="xpu-smi"}`))
	require.Equal(t, 1.0, value(t, s, `xpu_exporter_source_up{source="discovery"}`))
	require.Equal(t, 0.0, value(t, s, `xpu_exporter_xpu_smi_skipped_lines{}`))
	require.Contains(t, s, `xpu_exporter_collect_duration_seconds{}`)
	_, hasPods := s[`xpu_exporter_source_up{source="pod-resources"}`]
	require.False(t, hasPods, "attribution is off")
}

// A host without xpu-smi still exports what discovery knows, with
// xpu_exporter_source_up{source="xpu-smi"} 0; a device in an error state
// is unhealthy with the reason.
func TestCollectWithoutXPUSMI(t *testing.T) {
	log := &logtest.Recorder{}
	c, _ := hostCollector(t, fakehost.Degraded(), nil, Config{Log: log})
	s := scrape(t, c)
	require.Equal(t, 0.0, value(t, s, `xpu_exporter_source_up{source="xpu-smi"}`))
	require.Empty(t, named(s, "xpu_memory_used_bytes"))
	require.Equal(t, 0.0, value(t, s, `xpu_healthy{model="unknown",pci_bus_id="0000:5f:00.0",xpu="3"}`))
	require.Equal(t, 1.0, value(t, s, `xpu_health_info{model="unknown",pci_bus_id="0000:5f:00.0",reason="the driver reports state ERROR",xpu="3"}`))
	require.Equal(t, 1.0, value(t, s, `xpu_healthy{model="unknown",pci_bus_id="0000:3b:00.0",xpu="0"}`))
	require.Equal(t, 16384.0*(1<<20), value(t, s, `xpu_memory_total_bytes{model="unknown",pci_bus_id="0000:3b:00.0",xpu="0"}`))
	scrape(t, c)
	require.Equal(t, 1, log.Count("xpu-smi not found"), "reported once: %v", log.Lines())
}

// VFs of a partitioned card are devices like any other, with the PF's
// address in parent_pci_bus_id; the PF with VFs is not offered.
func TestCollectVFs(t *testing.T) {
	c, _ := hostCollector(t, fakehost.R200SRIOV(), func(_ *fakehost.Tree, s *fakehost.XPUSMIState) {
		s.Devices[len(s.Devices)-1].UsedMiB = 100
	}, Config{})
	s := scrape(t, c)
	require.Len(t, named(s, "xpu_healthy"), 4, s)
	require.Empty(t, named(s, "xpu_healthy", `xpu="0"`), "the PF with VFs is not offered")
	require.Equal(t, 100.0*(1<<20), value(t, s, `xpu_memory_used_bytes{model="R200 VF",parent_pci_bus_id="0000:3b:00.0",pci_bus_id="0000:3b:00.3",xpu="4"}`))
	require.Equal(t, 5120.0*(1<<20), value(t, s, `xpu_memory_total_bytes{model="R200 VF",parent_pci_bus_id="0000:3b:00.0",pci_bus_id="0000:3b:00.3",xpu="4"}`))
}

// The 4.x driver's reset counter, and a bad line of xpu-smi reported once
// and skipped, never guessed.
func TestCollectResetsAndBadLines(t *testing.T) {
	h := fakehost.R200SRIOV()
	h.Devices[1].Resets = 3
	log := &logtest.Recorder{}
	c, tr := hostCollector(t, h, nil, Config{Log: log})
	s := scrape(t, c)
	require.Equal(t, 3.0, value(t, s, `xpu_resets_total{model="R200",pci_bus_id="0000:5e:00.0",xpu="1"}`))
	require.Equal(t, 1.0, value(t, s, `xpu_exporter_source_up{source="procfs"}`))

	// A line with another field count: xpu-smi 0 loses its telemetry only.
	st := fakehost.DefaultTelemetry(tr)
	st.Mode = fakehost.SMIOddLine
	require.NoError(t, fakehost.WriteXPUSMIState(tr.Root, st))
	for range 2 {
		s = scrape(t, c)
		require.Equal(t, 1.0, value(t, s, `xpu_exporter_xpu_smi_skipped_lines{}`))
		require.Len(t, named(s, "xpu_memory_used_bytes"), 3)
	}
	require.Equal(t, 1, log.Count("33 fields, not 32"), "%v", log.Lines())
}

// The facts are the node's one reading (discover.Facts): a P800 VF's
// model and memory as its labels and DRA attributes give them, on a
// driver 5.x host.
func TestCollectP800VFs(t *testing.T) {
	c, tr := hostCollector(t, fakehost.P800SRIOV(), nil, Config{NoXPUSMI: true})
	s := scrape(t, c)
	require.Len(t, named(s, "xpu_healthy"), 3, s)
	vf := tr.ComputeDevices()[0]
	base := fmt.Sprintf(`model="P800 VF",parent_pci_bus_id="%s",pci_bus_id="%s",xpu="%d"`, vf.Parent, vf.BDF, vf.Index)
	require.Equal(t, 49152.0*(1<<20), value(t, s, `xpu_memory_total_bytes{`+base+`}`))
	require.Len(t, named(s, "xpu_info", `model="P800 VF"`, `family="Kunlun3"`), 2)
	_, smi := s[`xpu_exporter_source_up{source="xpu-smi"}`]
	require.False(t, smi, "the source is off")
}

// An xpu-smi index whose -i N -q fails is left out, not guessed, and asked
// again a minute later.
func TestCollectRetriesFailedQuery(t *testing.T) {
	now := time.Now()
	c, tr := hostCollector(t, fakehost.P800x8(), func(_ *fakehost.Tree, s *fakehost.XPUSMIState) { s.Mode = fakehost.SMINoQ }, Config{})
	c.o.now = func() time.Time { return now }
	s := scrape(t, c)
	require.Equal(t, 1.0, value(t, s, `xpu_exporter_source_up{source="xpu-smi"}`))
	require.Empty(t, named(s, "xpu_memory_used_bytes"))
	require.NoError(t, fakehost.WriteXPUSMIState(tr.Root, fakehost.DefaultTelemetry(tr)))
	s = scrape(t, c)
	require.Empty(t, named(s, "xpu_memory_used_bytes"), "not asked again yet")
	now = now.Add(qRetry)
	s = scrape(t, c)
	require.Len(t, named(s, "xpu_memory_used_bytes"), 8)
}

// Directories linked out of the dev root (/proc/xpu -> ../../elsewhere,
// /sys/module/kunlun -> /elsewhere, one device's /proc/xpu/devN -> a
// directory outside) are resolved inside it: xpu_info carries nothing of
// the 0600 files there, and xpu_resets_total is not their count.
func TestCollectResolvesDirectoriesInRoot(t *testing.T) {
	t.Run("driver directories", func(t *testing.T) {
		c, tr := hostCollector(t, fakehost.R200SRIOV(), nil, Config{})
		fakehosttest.LinkDirsOut(t, tr)
		s := scrape(t, c)
		require.NotEmpty(t, named(s, "xpu_info"))
		for k, v := range s {
			require.NotContains(t, k, fakehosttest.OutsideSecret)
			if strings.HasPrefix(k, "xpu_resets_total{") {
				require.NotEqual(t, float64(fakehosttest.OutsideResets), v, k)
			}
		}
	})
	t.Run("one device's directory", func(t *testing.T) {
		h := fakehost.R200SRIOV()
		h.Devices[1].Resets = 3
		c, tr := hostCollector(t, h, nil, Config{})
		outside := filepath.Join(t.TempDir(), "dev1")
		require.NoError(t, os.Mkdir(outside, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(outside, "reset_count"), []byte("4242\n"), 0o600))
		for _, name := range []string{"info", "state", "mminfo"} {
			data, err := os.ReadFile(tr.Path("/proc/xpu/dev1/" + name))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(outside, name), data, 0o600))
		}
		require.NoError(t, os.RemoveAll(tr.Path("/proc/xpu/dev1")))
		require.NoError(t, os.Symlink(outside, tr.Path("/proc/xpu/dev1")))
		s := scrape(t, c)
		for k, v := range named(s, "xpu_resets_total") {
			require.NotEqual(t, 4242.0, v, k)
		}
	})
}
