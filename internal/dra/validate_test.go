package dra

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// longVersion is a dotted version of more than 64 bytes, which SemVer
// turns into a version of more than 64 bytes too.
var longVersion = "5.0.21" + strings.Repeat(".1234", 13)

// Each host fact that made the API server refuse the slice (docs/security.md,
// "Host facts that make the API server refuse the slice") is left out with a warning, and the rest of the slice stays.
func TestSliceValid(t *testing.T) {
	for _, tc := range []struct {
		description string
		host        fakehost.Host
		mutate      func(h *discover.Host)
		check       func(t *testing.T, slices []*resourceapi.ResourceSlice)
		warning     string
	}{
		{
			description: "a long dotted driver version",
			host: func() fakehost.Host {
				h := fakehost.P800x8()
				h.DriverVersion = longVersion
				return h
			}(),
			check: func(t *testing.T, s []*resourceapi.ResourceSlice) {
				for _, d := range s[0].Spec.Devices {
					require.NotContains(t, d.Attributes, resourceapi.QualifiedName(AttrDriverVersion))
					require.Contains(t, d.Attributes, resourceapi.QualifiedName(AttrDriverVersion+"Full"), "the text is cut to 64 bytes by the attribute builder")
				}
			},
			warning: "device xpu-0: attribute driverVersion left out: the version value is 71 bytes long, more than the 64 the API takes",
		},
		{
			description: "an overflowing mminfo",
			host:        fakehost.P800x8(),
			mutate:      func(h *discover.Host) { h.Devices[2].MemoryMiB = 1 << 43 },
			check: func(t *testing.T, s []*resourceapi.ResourceSlice) {
				require.Nil(t, deviceByName(t, s, "xpu-2").Capacity, "no -1Mi")
				require.Equal(t, "xpu-2", s[0].Spec.Devices[7].Name, "a device without memory comes last")
				require.Contains(t, s[0].Spec.Devices[1].Capacity, resourceapi.QualifiedName(CapacityMemory))
			},
			warning: "device xpu-2: capacity memory left out: -9223372036854775808 is negative (an overflowing size in the host's files)",
		},
		{
			description: "a long PCIe root name",
			host:        fakehost.P800x8(),
			mutate:      func(h *discover.Host) { h.Devices[0].PCI.PCIeRoot = "pci" + strings.Repeat("0000:00-", 9) },
			check: func(t *testing.T, s []*resourceapi.ResourceSlice) {
				require.NotContains(t, s[0].Spec.Devices[0].Attributes, resourceapi.QualifiedName("resource.kubernetes.io/pcieRoot"))
				require.Contains(t, s[0].Spec.Devices[1].Attributes, resourceapi.QualifiedName("resource.kubernetes.io/pcieRoot"))
			},
			warning: "device xpu-0: attribute resource.kubernetes.io/pcieRoot left out: the string value is 75 bytes long",
		},
		{
			description: "a serial that is not UTF-8",
			host:        fakehost.P800x8(),
			mutate:      func(h *discover.Host) { h.Devices[0].Serial = "02P\xff\xfe" },
			check: func(t *testing.T, s []*resourceapi.ResourceSlice) {
				require.NotContains(t, s[0].Spec.Devices[0].Attributes, resourceapi.QualifiedName(AttrSerial))
			},
			warning: `device xpu-0: attribute serial left out: the string value "02P\xff\xfe" is not valid UTF-8`,
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			f := newFixture(t, tc.host)
			if tc.mutate != nil {
				disc := discoverTree(f.tree)
				f.d = f.driver(t, func(c *Config) {
					c.Discover = func() (*discover.Host, error) {
						h, err := disc()
						if err == nil {
							tc.mutate(h)
						}
						return h, err
					}
				})
			}
			require.True(t, f.d.Refresh())
			s := f.d.Slices()
			require.Len(t, s, 1)
			require.Len(t, s[0].Spec.Devices, 8)
			tc.check(t, s)
			require.Equal(t, 1, f.log.Count(tc.warning), f.log.String())
			// Logged once per change, not at every poll.
			f.d.Refresh()
			require.Equal(t, 1, f.log.Count(tc.warning))
		})
	}
}

// 70 XPUs and one taint: the API takes 64 devices per slice with taints,
// so the pool has two slices; without the taint one slice holds them all.
func TestSliceSplit(t *testing.T) {
	f := newFixture(t, fakehost.Scaled(70, 4))
	require.True(t, f.d.Refresh())
	s := f.d.Slices()
	require.Len(t, s, 1)
	require.Len(t, s[0].Spec.Devices, 70)

	f.setState(t, 5, "ERROR")
	require.True(t, f.d.Refresh())
	s = f.d.Slices()
	require.Len(t, s, 2)
	require.Len(t, s[0].Spec.Devices, resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures)
	require.Len(t, s[1].Spec.Devices, 70-resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures)
	seen := map[string]bool{}
	for i, sl := range s {
		require.Equal(t, int64(2), sl.Spec.Pool.ResourceSliceCount)
		require.Equal(t, "node-1", sl.Spec.Pool.Name)
		require.Equal(t, "node-1-xpu.baidu.com-"+string(rune('0'+i)), sl.Name)
		for _, d := range sl.Spec.Devices {
			require.False(t, seen[d.Name], d.Name)
			seen[d.Name] = true
		}
	}
	require.Len(t, seen, 70)
	require.Len(t, f.d.Resources().Pools["node-1"].Slices, 2)

	// 130 untainted XPUs: more than 128 in one slice.
	f = newFixture(t, fakehost.Scaled(130, 4))
	f.d.Refresh()
	require.Len(t, f.d.Slices(), 2)
	require.Len(t, f.d.Slices()[0].Spec.Devices, resourceapi.ResourceSliceMaxDevices)
}

// A slice the API server refuses is kept as the driver's PublishError
// until a write succeeds again.
func TestPublishRefused(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	k := startKubelet(t, f.d)
	var refuse atomic.Bool
	refuse.Store(true)
	k.client.PrependReactor("create", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceSlice"}, "node-1-xpu.baidu.com", field.ErrorList{field.TooMany(field.NewPath("spec", "devices"), 70, 64)})
		}
		return false, nil, nil
	})
	registered := &registerapi.RegistrationStatus{PluginRegistered: true}
	require.EqualError(t, f.d.Ready(nil), "not registered with the kubelet yet")
	require.EqualError(t, f.d.Ready(&registerapi.RegistrationStatus{Error: "socket not found"}), "the kubelet refused the registration: socket not found")
	require.EqualError(t, f.d.Ready(registered), "the ResourceSlice is not published yet")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.d.Run(ctx, k.helper) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return f.d.PublishError() != nil }, 10*time.Second, 10*time.Millisecond)
	require.ErrorContains(t, f.d.Ready(registered), "must have at most 64 items", "readiness names the refusal")
	require.ErrorContains(t, f.d.PublishError(), "the API server did not take the ResourceSlice (processing ResourceSlice objects): ")
	require.ErrorContains(t, f.d.PublishError(), "spec.devices: Too many: 70: must have at most 64 items")
	refuse.Store(false)
	require.Eventually(t, func() bool { return f.d.PublishError() == nil }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, f.d.Ready(registered))
	require.True(t, f.log.Has("the API server took the ResourceSlice of node node-1 again"))
}
