package xpunode

import (
	"testing"

	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The health values are the device plugin API's: the plugin passes them on.
func TestHealthValuesAreTheKubeletsAPI(t *testing.T) {
	require.Equal(t, pluginapi.Healthy, Healthy)
	require.Equal(t, pluginapi.Unhealthy, Unhealthy)
}

func TestHealthOf(t *testing.T) {
	for _, tc := range []struct {
		state, want string
	}{
		{"RUNNING", Healthy},
		{"", Healthy},
		{"LOWPOWER", Healthy},
		{"PAUSE", Healthy},
		{"running\n", Healthy},
		{"RUNNING\nERROR", Healthy},
		{"SOMETHING_NEW", Unhealthy},
		{"ERROR\nRUNNING", Unhealthy},
		{"\x1b[32mRUNNING", Unhealthy},
		{"ERROR", Unhealthy},
		{" error\n", Unhealthy},
		{"INVALID", Unhealthy},
		{"IN_RESET", Unhealthy},
		{"UNKNOWN", Unhealthy},
		{"PROBE_ERROR", Unhealthy},
		{"RECOVERING", Unhealthy},
	} {
		t.Run(tc.state, func(t *testing.T) {
			require.Equal(t, tc.want, HealthOf(tc.state))
		})
	}
}

func TestUnnamed(t *testing.T) {
	devs := []Device{{ID: "0"}, {ID: "3"}, {ID: "1"}}
	require.Equal(t, []string{"3", "1"}, Unnamed(devs, map[string]bool{"0": true, "2": true}))
	require.Nil(t, Unnamed(devs, map[string]bool{"0": true, "1": true, "3": true}))
}
