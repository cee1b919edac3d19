package exporter

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
)

func TestShape(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{`line 1: 33 fields, not 32: "xpu 0 45 80.5 W"`, `line 3: 33 fields, not 32: "xpu 12 61 93 W"`},
		{`field 4 (temperature) "1.5" is not`, `field 4 (temperature) "1000" is not`},
	} {
		require.Equal(t, shape(tc.a), shape(tc.b))
	}
	require.Equal(t, `line #: # fields, `, shape(`line 10: 33 fields, "xpu 0 45.x"`))
	require.Equal(t, `xpu-smi #.x: `, shape(`xpu-smi 4.33.x: "a"`))
	require.NotEqual(t, shape(`field 4 (temperature)`), shape(`field 8 (power)`))
}

// A skipped xpu-smi line whose values change at every collection is
// logged once, not once per collection (100 collections gave 200
// warnings, all kept for good); what is remembered per source is bounded.
func TestReportOncePerShape(t *testing.T) {
	log := &logtest.Recorder{}
	c, tr := hostCollector(t, fakehost.R200SRIOV(), nil, Config{Log: log})
	st := fakehost.DefaultTelemetry(tr)
	st.Mode = fakehost.SMIOddLine
	for i := range 100 {
		st.Devices[0].Temperature, st.Devices[0].Power, st.Devices[0].UsedMiB = float64(30+i%50), 60+float64(i)/10, int64(i)
		require.NoError(t, fakehost.WriteXPUSMIState(tr.Root, st))
		s := scrape(t, c)
		require.Equal(t, 1.0, value(t, s, `xpu_exporter_xpu_smi_skipped_lines{}`))
	}
	require.Equal(t, 1, log.Count("33 fields, not 32"), "%s", log.Warnings())
	require.Len(t, c.reported[sourceXPUSMILines].seen, 1)

	for i := range 1000 {
		c.report(SourcePodResources, fmt.Sprintf("failure number %d", i))
	}
	require.Len(t, c.reported[SourcePodResources].seen, maxReports)
	require.Equal(t, maxReports, log.Count("failure number"))
	require.Equal(t, 1, log.Count("the others are not logged until it works again"))
	c.recovered(SourcePodResources)
	require.NotContains(t, c.reported, SourcePodResources)
}
