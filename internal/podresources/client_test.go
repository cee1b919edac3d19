//go:build !no_podresources

package podresources

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
)

// Partition resources (the resource name plus a size) are ours; a longer
// name that only starts with the prefix is not.
func TestPartitionResources(t *testing.T) {
	// A DRA device known by its CDI device only (a device name of
	// another form).
	cdiPod := podresourcestest.DRAPod("ml", "cdi", "main", "c", names.DRADriver, "vf-a")
	cdiPod.Containers[0].DynamicResources[0].ClaimResources[0].CdiDevices = []*podresourcesapi.CDIDevice{{Name: "baidu.com/xpu=6"}, {Name: "other.com/gpu=7"}}
	sock := podresourcestest.Serve(t, podresourcestest.NewServer(&podresourcesapi.ListPodResourcesResponse{
		PodResources: []*podresourcesapi.PodResources{
			podresourcestest.DevicePluginPod("ml", "quarter", "main", "baidu.com/xpu-24gb", "3"),
			podresourcestest.DevicePluginPod("ml", "other", "main", "baidu.com/xpuother", "4"),
			podresourcestest.DRAPod("ml", "half", "main", "big", names.DRADriver, "xpu-5"),
			cdiPod,
		},
	}))
	got, err := New(sock, Config{Timeout: 5 * time.Second}).List(context.Background())
	require.NoError(t, err)
	require.Equal(t, Owners{
		3: {{Namespace: "ml", Pod: "quarter", Container: "main"}},
		5: {{Namespace: "ml", Pod: "half", Container: "main", Claim: "big", ClaimNamespace: "ml"}},
		6: {{Namespace: "ml", Pod: "cdi", Container: "main", Claim: "c", ClaimNamespace: "ml"}},
	}, got)
}

// sharingWithRename is docs/kubernetes.md's sharing configuration with its
// rename given: the whole cards advertised as example.com/xpu-ts, the
// 24 GiB partitions as baidu.com/xpu-24gb.shared.
const sharingWithRename = `version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
      - name: baidu.com/xpu
        replicas: 4
        rename: example.com/xpu-ts
      - name: baidu.com/xpu-24gb
        replicas: 2
`

// Every name the device plugin advertises counts, the sharing
// configuration's renames too: a pod holding example.com/xpu-ts holds its
// XPU once the client is given the plugin's file.
func TestRenamedResourcesCount(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte(sharingWithRename), 0o644))
	sock := podresourcestest.Serve(t, podresourcestest.NewServer(&podresourcesapi.ListPodResourcesResponse{
		PodResources: []*podresourcesapi.PodResources{
			podresourcestest.DevicePluginPod("ml", "ts", "main", "example.com/xpu-ts", "2::3"),
			podresourcestest.DevicePluginPod("ml", "quarter", "main", "baidu.com/xpu-24gb.shared", "5::1"),
			podresourcestest.DevicePluginPod("ml", "other", "main", "example.com/gpu", "4"),
		},
	}))
	got, err := New(sock, Config{}).List(context.Background())
	require.NoError(t, err)
	require.Equal(t, Owners{5: {{Namespace: "ml", Pod: "quarter", Container: "main"}}}, got, "without the file, the rename is not known")

	cfg, err := Config{}.WithSharingFile(file)
	require.NoError(t, err)
	require.Equal(t, []string{"example.com/xpu-ts", "baidu.com/xpu-24gb.shared"}, cfg.Renames)
	got, err = New(sock, cfg).List(context.Background())
	require.NoError(t, err)
	require.Equal(t, Owners{
		2: {{Namespace: "ml", Pod: "ts", Container: "main"}},
		5: {{Namespace: "ml", Pod: "quarter", Container: "main"}},
	}, got)

	unchanged, err := cfg.WithSharingFile("")
	require.NoError(t, err)
	require.Equal(t, cfg, unchanged)
	// A file the plugin would refuse is refused here too, naming it.
	require.NoError(t, os.WriteFile(file, []byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: other.com/xpu\n        replicas: 2\n"), 0o644))
	_, err = Config{}.WithSharingFile(file)
	require.ErrorContains(t, err, file)
	require.ErrorContains(t, err, "is not this plugin's resource baidu.com/xpu")
}

// The pod of Self holds nothing (the exporter's own, whose admin-access
// claim names every XPU); a pod of that name in another namespace still
// holds its XPU.
func TestSelfHoldsNothing(t *testing.T) {
	resp := &podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
		podresourcestest.DRAPod("xpu-system", "xpu-exporter-abcde", "xpu-exporter", "xpus", names.DRADriver, "xpu-0", "xpu-1"),
		podresourcestest.DRAPod("ml", "xpu-exporter-abcde", "main", "mine", names.DRADriver, "xpu-1"),
	}}
	got := New("", Config{Self: types.NamespacedName{Namespace: "xpu-system", Name: "xpu-exporter-abcde"}}).Owners(resp)
	require.Equal(t, Owners{1: {{Namespace: "ml", Pod: "xpu-exporter-abcde", Container: "main", Claim: "mine", ClaimNamespace: "ml"}}}, got)
	require.Len(t, New("", Config{}).Owners(resp)[0], 1, "without Self, the exporter's pod holds its claim's XPUs")
}

// A dynamic-mode claim names a card's slot (xpu-0-q2, no node) and the
// VF's function by its PCI address in its CDI device: the address maps to
// the VF's node through Config.Addresses, and maps to nothing without it.
func TestSlotClaimsByAddress(t *testing.T) {
	pod := podresourcestest.DRAPod("ml", "quarter", "main", "q", names.DRADriver, "xpu-0-q2")
	pod.Containers[0].DynamicResources[0].ClaimResources[0].CdiDevices = []*podresourcesapi.CDIDevice{{Name: "baidu.com/xpu=0000:83:00.3"}}
	sock := podresourcestest.Serve(t, podresourcestest.NewServer(&podresourcesapi.ListPodResourcesResponse{
		PodResources: []*podresourcesapi.PodResources{pod},
	}))
	got, err := New(sock, Config{Timeout: 5 * time.Second, Addresses: map[string]int{"0000:83:00.3": 9}}).List(context.Background())
	require.NoError(t, err)
	require.Equal(t, Owners{9: {{Namespace: "ml", Pod: "quarter", Container: "main", Claim: "q", ClaimNamespace: "ml"}}}, got)

	got, err = New(sock, Config{Timeout: 5 * time.Second}).List(context.Background())
	require.NoError(t, err)
	require.Empty(t, got)
}

// With Config.DynamicCards, dynamic-mode device names are read as cards
// and slots: xpu-1 is the card at place 1 (its PF's node), not /dev/xpu1;
// xpu-0-h1 the second VF of card 0 while it has 2; a slot of a count the
// card no longer has holds the card's PF (its VFs without one); a place
// that is no card of the mode is xpu-N for /dev/xpuN.
func TestDynamicDeviceNames(t *testing.T) {
	cards := map[int]CardNodes{0: {PF: 0, VFs: []int{1, 2}}, 1: {PF: 3}, 2: {PF: -1, VFs: []int{7, 8}}}
	for _, tc := range []struct {
		device string
		cards  map[int]CardNodes
		want   []int
	}{
		{"xpu-1", cards, []int{3}},
		{"xpu-0-h1", cards, []int{2}},
		{"xpu-0-q3", cards, []int{0}},
		{"xpu-2-h0", cards, []int{7}},
		{"xpu-2-q0", cards, []int{7, 8}},
		{"xpu-5", cards, []int{5}},
		{"xpu-0-h5", cards, nil},
		{"xpu-1", nil, []int{1}},
		{"xpu-0-h1", nil, nil},
	} {
		t.Run(tc.device+"/dynamic="+strconv.FormatBool(tc.cards != nil), func(t *testing.T) {
			resp := &podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
				podresourcestest.DRAPod("ml", "p", "main", "c", names.DRADriver, tc.device),
			}}
			got := New("", Config{DynamicCards: tc.cards}).Owners(resp)
			want := Owners{}
			for _, idx := range tc.want {
				want[idx] = []Owner{{Namespace: "ml", Pod: "p", Container: "main", Claim: "c", ClaimNamespace: "ml"}}
			}
			require.Equal(t, want, got)
		})
	}
}
