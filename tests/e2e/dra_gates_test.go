package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestDRADynamicGates asks the test cluster's real API server (control
// plane only) whether it keeps what dynamic partitions publish on a fake
// 8-card P800 SR-IOV host: with DRADeviceCompatibilityGroups on it takes
// the node's slices (9 counter sets in two slices, 56 devices with their
// counters and groups in one) whole, which is the API server's own
// validation of them; with the gate off it drops the groups and the check
// names the gate.
func TestDRADynamicGates(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8SRIOV())
	d, err := dra.New(dra.Config{
		NodeName: "node-1",
		Discover: func() (*discover.Host, error) { return discover.Discover(tree.DiscoverOptions()...) },
		SpecDirs: []string{t.TempDir()},
	})
	require.NoError(t, err)
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
			err := d.CheckDynamicGates(ctx, c.Client)
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
