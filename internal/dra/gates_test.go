package dra

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// apiServerDropping is a fake API server that answers a ResourceSlice
// create with the slice less what drop removes, as an API server whose
// gate is off does.
func apiServerDropping(drop func(*resourceapi.ResourceSlice)) *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice).DeepCopy()
		drop(s)
		return true, s, nil
	})
	return c
}

func dropGroups(s *resourceapi.ResourceSlice) {
	for i := range s.Spec.Devices {
		for j := range s.Spec.Devices[i].ConsumesCounters {
			s.Spec.Devices[i].ConsumesCounters[j].CompatibilityGroups = nil
		}
	}
}

func dropCounters(s *resourceapi.ResourceSlice) {
	s.Spec.SharedCounters = nil
	for i := range s.Spec.Devices {
		s.Spec.Devices[i].ConsumesCounters = nil
	}
}

func TestCheckDynamicGates(t *testing.T) {
	ctx := context.Background()
	t.Run("the probes are slices the API takes, sent as a dry run", func(t *testing.T) {
		probes := gateProbes("xpu.baidu.com", "node-1")
		checkSliceLimits(t, probes)
		require.Len(t, probes[1].Spec.Devices, 7)
		c := apiServerDropping(func(*resourceapi.ResourceSlice) {})
		require.NoError(t, CheckDynamicGates(ctx, c, "xpu.baidu.com", "node-1"))
		creates := 0
		for _, a := range c.Actions() {
			if a.GetVerb() == "create" {
				creates++
				require.Equal(t, []string{"All"}, a.(k8stesting.CreateActionImpl).CreateOptions.DryRun)
			}
		}
		require.Equal(t, 2, creates)
	})
	for _, tc := range []struct {
		description string
		drop        func(*resourceapi.ResourceSlice)
		gates       []string
	}{
		{"groups dropped: DRADeviceCompatibilityGroups named", dropGroups, []string{GateDeviceCompatibilityGroups}},
		{"counters dropped: DRAPartitionableDevices named", dropCounters, []string{GatePartitionableDevices}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			err := CheckDynamicGates(ctx, apiServerDropping(tc.drop), "xpu.baidu.com", "node-1")
			require.ErrorIs(t, err, ErrGateOff)
			var ge *GateError
			require.ErrorAs(t, err, &ge)
			require.Equal(t, tc.gates, ge.Gates)
			require.Contains(t, err.Error(), "kube-apiserver and kube-scheduler")
			require.Contains(t, err.Error(), "--feature-gates="+tc.gates[0]+"=true")
		})
	}
	t.Run("a refused probe is an error of its own, not a gate", func(t *testing.T) {
		c := fake.NewClientset()
		refused := errors.New("forbidden")
		c.PrependReactor("create", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, refused })
		err := CheckDynamicGates(ctx, c, "xpu.baidu.com", "node-1")
		require.ErrorIs(t, err, refused)
		require.NotErrorIs(t, err, ErrGateOff)
		require.Contains(t, err.Error(), "node-1-xpu.baidu.com-gate-check-0")
	})
}
