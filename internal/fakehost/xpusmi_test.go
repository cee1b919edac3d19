package fakehost

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fake xpu-smi prints the telemetry of its state file in the public
// layout, and finds the state file from its own path (no environment).
func TestFakeXPUSMITelemetry(t *testing.T) {
	tr := build(t, P800x8())
	s := DefaultTelemetry(tr)
	require.Len(t, s.Devices, 8)
	s.Devices[1].UsedMiB, s.Devices[1].Utilization = 4096, 37
	require.NoError(t, WriteXPUSMIState(tr.Root, s))

	cmd := exec.Command(tr.Path(XPUSMIPath), "-m")
	cmd.Env = []string{}
	out, err := cmd.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 8)
	f := strings.Fields(lines[1])
	require.Len(t, f, 32)
	require.Equal(t, []string{"1", "4096", "98304", "37", "(P800", "OAM)"}, []string{f[1], f[17], f[18], f[19], f[21], f[22]})

	cmd = exec.Command(tr.Path(XPUSMIPath), "-i", "1", "-q")
	cmd.Env = []string{}
	out, err = cmd.Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "Bus Id                          : "+s.Devices[1].BusID+"\n")
	require.NotContains(t, string(out), s.Devices[0].BusID)
}
