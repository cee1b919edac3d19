package exporter

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// noise matches a value with a run of zeros or nines after the point, the
// mark of a conversion that was not rounded (0.5700000000000001).
var noise = regexp.MustCompile(`\.\d*(0{6,}|9{6,})\d*(e[+-]\d+)?$`)

// The text exposition carries the values xpu-smi printed, converted without
// float noise: 57 % is 0.57, not 0.5700000000000001.
func TestExpositionNoFloatNoise(t *testing.T) {
	c, tr := hostCollector(t, fakehost.P800x8(), func(_ *fakehost.Tree, s *fakehost.XPUSMIState) {
		for i := range s.Devices {
			s.Devices[i].Utilization = int64(35 + 6*i) // 35, 41, ... 77: each noisy as N * 0.01
			s.Devices[i].UsedMiB = int64(1000 + i)
			s.Devices[i].Power = 60.1
		}
	}, Config{})
	out, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "xpu_utilization_ratio", "xpu_memory_used_bytes", "xpu_power_watts", "xpu_temperature_celsius")
	require.NoError(t, err)
	text := string(out)
	dev := tr.ComputeDevices()[0]
	require.Contains(t, text, fmt.Sprintf("xpu_utilization_ratio{model=\"P800\",pci_bus_id=\"%s\",xpu=\"0\"} 0.35\n", dev.BDF))
	require.Contains(t, text, "} 60.1\n")
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		require.NotRegexp(t, noise, fields[len(fields)-1], "float noise in %q", line)
	}
}

// A fact the host does not tell (the serial of an R200 whose procfs has
// none; serials, driver version and family on a driver 5.x host without
// /proc/xpu) is left out of xpu_info, never exported as an empty label; the
// known ones stay.
func TestInfoLeavesOutUnknownFacts(t *testing.T) {
	for _, tc := range []struct {
		description string
		host        fakehost.Host
		xpu         string
		want, not   []string
	}{
		{"R200 without a serial", fakehost.Degraded(), "1", []string{`driver_version="4.33.0"`, `family="Kunlun2"`}, []string{"serial="}},
		{"driver 5.x without procfs", fakehost.P800XRE5(), "2", []string{`xre_version="5.0.21.47"`}, []string{"serial=", "driver_version=", "family="}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			c, _ := hostCollector(t, tc.host, nil, Config{NoXPUSMI: true})
			out, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "xpu_info")
			require.NoError(t, err)
			text := string(out)
			require.NotContains(t, text, `=""`)
			var line string
			for l := range strings.Lines(text) {
				if strings.Contains(l, `xpu="`+tc.xpu+`"`) {
					line = l
				}
			}
			require.NotEmpty(t, line, text)
			for _, w := range tc.want {
				require.Contains(t, line, w)
			}
			for _, n := range tc.not {
				require.NotContains(t, line, n)
			}
		})
	}
}

// A serial that discovery does not know (a device whose procfs DeviceSN is
// empty) is taken from xpu-smi -q's Serial Number; one discovery knows
// stays.
func TestInfoSerialFromXPUSMI(t *testing.T) {
	h := fakehost.P800x8()
	known := h.Devices[0].Serial
	require.NotEmpty(t, known)
	h.Devices[1].Serial = ""
	c, tr := hostCollector(t, h, func(_ *fakehost.Tree, s *fakehost.XPUSMIState) {
		for i := range s.Devices {
			s.Devices[i].Serial = "SMI-" + strconv.Itoa(i)
		}
	}, Config{})
	out, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "xpu_info")
	require.NoError(t, err)
	text := string(out)
	lineOf := func(bus string) string {
		for l := range strings.Lines(text) {
			if strings.Contains(l, `pci_bus_id="`+bus+`"`) {
				return l
			}
		}
		t.Fatalf("no xpu_info of %s in\n%s", bus, text)
		return ""
	}
	devs := tr.ComputeDevices()
	require.Contains(t, lineOf(devs[1].BDF), `serial="SMI-1"`)
	require.Contains(t, lineOf(devs[0].BDF), `serial="`+known+`"`, "discovery's serial stays")
}
