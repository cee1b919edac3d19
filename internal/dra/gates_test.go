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

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
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

// sentSlices are the slices c was asked to create, failing t unless each
// create was a dry run.
func sentSlices(t *testing.T, c *fake.Clientset) []*resourceapi.ResourceSlice {
	t.Helper()
	var out []*resourceapi.ResourceSlice
	for _, a := range c.Actions() {
		if a.GetVerb() != "create" {
			continue
		}
		ca := a.(k8stesting.CreateActionImpl)
		require.Equal(t, []string{"All"}, ca.CreateOptions.DryRun)
		out = append(out, ca.GetObject().(*resourceapi.ResourceSlice))
	}
	return out
}

func TestCheckDynamicGates(t *testing.T) {
	ctx := context.Background()
	t.Run("the node's own dynamic slices, sent as a dry run, even in static mode", func(t *testing.T) {
		f := newFixture(t, fakehost.P800x8SRIOV())
		c := apiServerDropping(func(*resourceapi.ResourceSlice) {})
		require.NoError(t, f.d.CheckDynamicGates(ctx, c))
		sent := sentSlices(t, c)
		checkSliceLimits(t, sent)
		require.Len(t, sent, 3)
		require.Equal(t, "node-1-xpu.baidu.com-gate-check-2", sent[2].Name)
		require.Len(t, sent[2].Spec.Devices, 56)
	})
	t.Run("no SR-IOV card: one P800 card's slices", func(t *testing.T) {
		f := newFixture(t, fakehost.K200())
		c := apiServerDropping(func(*resourceapi.ResourceSlice) {})
		require.NoError(t, f.d.CheckDynamicGates(ctx, c))
		sent := sentSlices(t, c)
		checkSliceLimits(t, sent)
		require.Len(t, sent, 2)
		require.Len(t, sent[0].Spec.SharedCounters, 2)
		require.Len(t, sent[1].Spec.Devices, 7)
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
			f := newFixture(t, fakehost.P800SRIOV())
			err := f.d.CheckDynamicGates(ctx, apiServerDropping(tc.drop))
			require.ErrorIs(t, err, ErrGateOff)
			var ge *GateError
			require.ErrorAs(t, err, &ge)
			require.Equal(t, tc.gates, ge.Gates)
			require.Contains(t, err.Error(), "kube-apiserver and kube-scheduler")
			require.Contains(t, err.Error(), "--feature-gates="+tc.gates[0]+"=true")
		})
	}
	t.Run("a refused slice is an error of its own, not a gate", func(t *testing.T) {
		f := newFixture(t, fakehost.P800SRIOV())
		c := fake.NewClientset()
		refused := errors.New("forbidden")
		c.PrependReactor("create", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, refused })
		err := f.d.CheckDynamicGates(ctx, c)
		require.ErrorIs(t, err, refused)
		require.NotErrorIs(t, err, ErrGateOff)
		require.Contains(t, err.Error(), "node-1-xpu.baidu.com-gate-check-0")
	})
}
