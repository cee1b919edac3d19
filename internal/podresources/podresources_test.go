package podresources

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin"
	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
)

// The local copies of the device plugin's and the DRA driver's names are
// theirs.
func TestNamesAreThePluginsAndTheDriversOwn(t *testing.T) {
	require.Equal(t, deviceplugin.ReplicaSeparator, replicaSeparator)
	require.Equal(t, dra.DefaultDriverName, DefaultDRADriver)
	require.Equal(t, deviceplugin.DefaultResourceName, DefaultResourcePrefix)
	require.Equal(t, dra.DeviceName(7), draDevicePrefix+"7")
}

// Partition resources (the resource name plus a size) are ours; a longer
// name that only starts with the prefix is not.
func TestPartitionResources(t *testing.T) {
	// A DRA device known by its CDI device only (a device name of
	// another form).
	cdiPod := podresourcestest.DRAPod("ml", "cdi", "main", "c", DefaultDRADriver, "vf-a")
	cdiPod.Containers[0].DynamicResources[0].ClaimResources[0].CdiDevices = []*podresourcesapi.CDIDevice{{Name: "baidu.com/xpu=6"}, {Name: "other.com/gpu=7"}}
	sock := podresourcestest.Serve(t, podresourcestest.NewServer(&podresourcesapi.ListPodResourcesResponse{
		PodResources: []*podresourcesapi.PodResources{
			podresourcestest.DevicePluginPod("ml", "quarter", "main", "baidu.com/xpu-24gb", "3"),
			podresourcestest.DevicePluginPod("ml", "other", "main", "baidu.com/xpuother", "4"),
			podresourcestest.DRAPod("ml", "half", "main", "big", DefaultDRADriver, "xpu-5"),
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
