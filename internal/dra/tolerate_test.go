package dra

import (
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// TestTolerates: a toleration matches the driver's taint as the scheduler
// matches it, on key, operator, value and effect.
func TestTolerates(t *testing.T) {
	taint := resourceapi.DeviceTaint{Key: "xpu.baidu.com/unhealthy", Value: "ERROR", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	const key = "xpu.baidu.com/unhealthy"
	for _, tc := range []struct {
		description string
		tolerations []resourceapi.DeviceToleration
		want        bool
	}{
		{description: "none", want: false},
		{
			description: "Equal IN_RESET NoExecute does not tolerate ERROR (a toleration of another value takes no faulty XPU)",
			tolerations: []resourceapi.DeviceToleration{{Key: key, Operator: resourceapi.DeviceTolerationOpEqual, Value: "IN_RESET", Effect: resourceapi.DeviceTaintEffectNoExecute}},
		},
		{
			description: "Equal IN_RESET, any effect, does not tolerate ERROR",
			tolerations: []resourceapi.DeviceToleration{{Key: key, Operator: resourceapi.DeviceTolerationOpEqual, Value: "IN_RESET"}},
		},
		{
			description: "Equal ERROR NoExecute: the effect differs",
			tolerations: []resourceapi.DeviceToleration{{Key: key, Operator: resourceapi.DeviceTolerationOpEqual, Value: "ERROR", Effect: resourceapi.DeviceTaintEffectNoExecute}},
		},
		{
			description: "Equal ERROR NoSchedule", want: true,
			tolerations: []resourceapi.DeviceToleration{{Key: key, Operator: resourceapi.DeviceTolerationOpEqual, Value: "ERROR", Effect: resourceapi.DeviceTaintEffectNoSchedule}},
		},
		{
			description: "Equal ERROR, empty effect matches every effect", want: true,
			tolerations: []resourceapi.DeviceToleration{{Key: key, Operator: resourceapi.DeviceTolerationOpEqual, Value: "ERROR"}},
		},
		{
			description: "empty operator is Equal", want: true,
			tolerations: []resourceapi.DeviceToleration{{Key: key, Value: "ERROR"}},
		},
		{
			description: "empty operator is Equal: value differs",
			tolerations: []resourceapi.DeviceToleration{{Key: key, Value: "NoXPUCtrl"}},
		},
		{
			description: "Exists on the key, any value", want: true,
			tolerations: []resourceapi.DeviceToleration{{Key: key, Operator: resourceapi.DeviceTolerationOpExists}},
		},
		{
			description: "Exists on the key with another effect",
			tolerations: []resourceapi.DeviceToleration{{Key: key, Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute}},
		},
		{
			description: "Exists on another key",
			tolerations: []resourceapi.DeviceToleration{{Key: "gpu.example.com/unhealthy", Operator: resourceapi.DeviceTolerationOpExists}},
		},
		{
			description: "Equal ERROR on another key",
			tolerations: []resourceapi.DeviceToleration{{Key: "other", Operator: resourceapi.DeviceTolerationOpEqual, Value: "ERROR"}},
		},
		{
			description: "empty key with Exists matches every taint", want: true,
			tolerations: []resourceapi.DeviceToleration{{Operator: resourceapi.DeviceTolerationOpExists}},
		},
		{
			description: "empty key with Exists NoExecute: effect differs",
			tolerations: []resourceapi.DeviceToleration{{Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute}},
		},
		{description: "one of several matches", want: true, tolerations: []resourceapi.DeviceToleration{
			{Key: key, Operator: resourceapi.DeviceTolerationOpEqual, Value: "IN_RESET"},
			{Key: key, Operator: resourceapi.DeviceTolerationOpEqual, Value: "ERROR"},
		}},
		{description: "unknown operator", tolerations: []resourceapi.DeviceToleration{{Key: key, Operator: "Gt", Value: "ERROR"}}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			require.Equal(t, tc.want, tolerates(tc.tolerations, taint))
		})
	}
}

// TestPrepareTolerations: through the real helper, a claim tolerating only
// IN_RESET NoExecute is refused a device in ERROR, one tolerating the
// driver's taint as it is gets it.
func TestPrepareTolerations(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	k := startKubelet(t, f.d)
	f.setState(t, 3, "ERROR")
	key := f.d.TaintKey()

	reset := claim("in-reset", "xpu-3")
	reset.Status.Allocation.Devices.Results[0].Tolerations = []resourceapi.DeviceToleration{
		{Key: key, Operator: resourceapi.DeviceTolerationOpEqual, Value: "IN_RESET", Effect: resourceapi.DeviceTaintEffectNoExecute},
	}
	k.create(t, reset)
	require.Contains(t, k.prepare(t, reset).GetError(),
		"device xpu-3: the device cannot run work: the driver reports state ERROR (tainted xpu.baidu.com/unhealthy=ERROR:NoSchedule, which the allocation does not tolerate)")
	require.Empty(t, f.records(t))

	errClaim := claim("error", "xpu-3")
	errClaim.Status.Allocation.Devices.Results[0].Tolerations = []resourceapi.DeviceToleration{
		{Key: key, Operator: resourceapi.DeviceTolerationOpEqual, Value: "ERROR", Effect: resourceapi.DeviceTaintEffectNoSchedule},
	}
	k.create(t, errClaim)
	r := k.prepare(t, errClaim)
	require.Empty(t, r.GetError())
	require.Equal(t, []string{"baidu.com/xpu=3"}, cdiIDs(r))
}
