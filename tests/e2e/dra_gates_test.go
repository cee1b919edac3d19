package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestDRADynamicGates asks the test cluster's real API server (control
// plane only) whether it keeps what dynamic partitions publish: with
// DRADeviceCompatibilityGroups on it takes the probe slices (counter sets,
// the devices of one P800 card with their groups) whole; with the gate off
// it drops the groups and the check names the gate.
func TestDRADynamicGates(t *testing.T) {
	for _, tc := range []struct {
		description string
		gate        string
		off         []string
	}{
		{"gate on: the groups are kept", dra.GateDeviceCompatibilityGroups + "=true", nil},
		{"gate off: the check names the gate", dra.GateDeviceCompatibilityGroups + "=false", []string{dra.GateDeviceCompatibilityGroups}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			c := harness.NewCluster(t, harness.WithControlPlaneOnly(), harness.WithFeatureGates(tc.gate))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := dra.CheckDynamicGates(ctx, c.Client, dra.DefaultDriverName, "node-1")
			if tc.off == nil {
				require.NoError(t, err)
			} else {
				var ge *dra.GateError
				require.ErrorAs(t, err, &ge)
				require.Equal(t, tc.off, ge.Gates)
				t.Logf("refused: %v", err)
			}
			// A dry run stores nothing.
			slices := c.MustKubectl(t, "get", "resourceslices", "-o", "name")
			require.NotContains(t, slices.Stdout, "gate-check")
		})
	}
}
