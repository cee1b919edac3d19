package exporter

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
)

func containerWith(name string, devs []*podresourcesapi.ContainerDevices, dyn []*podresourcesapi.DynamicResource) *podresourcesapi.ContainerResources {
	return &podresourcesapi.ContainerResources{Name: name, Devices: devs, DynamicResources: dyn}
}

func pluginDevs(resource string, ids ...string) []*podresourcesapi.ContainerDevices {
	return []*podresourcesapi.ContainerDevices{{ResourceName: resource, DeviceIds: ids}}
}

func claim(name, ns, driver string, devices ...string) *podresourcesapi.DynamicResource {
	dr := &podresourcesapi.DynamicResource{ClaimName: name, ClaimNamespace: ns}
	for _, d := range devices {
		dr.ClaimResources = append(dr.ClaimResources, &podresourcesapi.ClaimResource{DriverName: driver, PoolName: "node-a", DeviceName: d})
	}
	return dr
}

func listResponse() *podresourcesapi.ListPodResourcesResponse {
	return &podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
		{Name: "train", Namespace: "ml", Containers: []*podresourcesapi.ContainerResources{
			containerWith("main", pluginDevs("baidu.com/xpu", "0", "1"), nil),
			containerWith("sidecar", pluginDevs("nvidia.com/gpu", "2"), nil),
		}},
		// Time-sliced /dev/xpu3: two replicas in one container, one in
		// another pod's container.
		{Name: "infer-a", Namespace: "ml", Containers: []*podresourcesapi.ContainerResources{
			containerWith("app", pluginDevs("baidu.com/xpu.shared", "3::0", "3::1"), nil),
		}},
		{Name: "infer-b", Namespace: "web", Containers: []*podresourcesapi.ContainerResources{
			containerWith("app", pluginDevs("baidu.com/xpu", "3::2"), nil),
		}},
		// Not ours: another resource with our prefix, IDs of another form.
		{Name: "odd", Namespace: "x", Containers: []*podresourcesapi.ContainerResources{
			containerWith("c", pluginDevs("baidu.com/xpuother", "4"), nil),
			containerWith("d", pluginDevs("baidu.com/xpu", "04", "xpu-4", "-1"), nil),
			containerWith("e", nil, []*podresourcesapi.DynamicResource{claim("gpu", "x", "gpu.nvidia.com", "xpu-4"), claim("weird", "x", "xpu.baidu.com", "gpu-4", "xpu-")}),
		}},
		// DRA: one claim of two XPUs.
		{Name: "dra-pod", Namespace: "team", Containers: []*podresourcesapi.ContainerResources{
			containerWith("worker", nil, []*podresourcesapi.DynamicResource{claim("two-xpus", "team", "xpu.baidu.com", "xpu-5", "xpu-6")}),
		}},
	}}
}

func TestOwners(t *testing.T) {
	p := podresources.New("unused", podresources.Config{})
	got := p.Owners(listResponse())
	require.Equal(t, podresources.Owners{
		0: {{Namespace: "ml", Pod: "train", Container: "main"}},
		1: {{Namespace: "ml", Pod: "train", Container: "main"}},
		3: {{Namespace: "ml", Pod: "infer-a", Container: "app"}, {Namespace: "web", Pod: "infer-b", Container: "app"}},
		5: {{Namespace: "team", Pod: "dra-pod", Container: "worker", Claim: "two-xpus", ClaimNamespace: "team"}},
		6: {{Namespace: "team", Pod: "dra-pod", Container: "worker", Claim: "two-xpus", ClaimNamespace: "team"}},
	}, got)
}

// Attribution through a PodResources server of the real API types: the
// device's series carry the pod labels, once per container holding it; a
// device nobody holds keeps its series without them.
func TestCollectAttribution(t *testing.T) {
	sock := podresourcestest.Serve(t, podresourcestest.NewServer(listResponse()))
	var busOf3 string
	c, tr := hostCollector(t, fakehost.P800x8(), func(tr *fakehost.Tree, s *fakehost.XPUSMIState) {
		s.Devices[3].UsedMiB = 777
		busOf3 = s.Devices[3].BusID
	}, Config{Pods: podresources.New(sock, podresources.Config{})})
	s := scrape(t, c)
	require.Equal(t, 1.0, value(t, s, `xpu_exporter_source_up{source="pod-resources"}`))
	used := named(s, "xpu_memory_used_bytes", `xpu="3"`)
	require.Equal(t, map[string]float64{
		`xpu_memory_used_bytes{exported_container="app",exported_namespace="ml",exported_pod="infer-a",model="P800",pci_bus_id="` + busOf3 + `",xpu="3"}`:  777 << 20,
		`xpu_memory_used_bytes{exported_container="app",exported_namespace="web",exported_pod="infer-b",model="P800",pci_bus_id="` + busOf3 + `",xpu="3"}`: 777 << 20,
	}, used)
	dev5 := tr.ComputeDevices()[5].BDF
	require.Equal(t, 1.0, value(t, s, `xpu_healthy{claim="two-xpus",claim_namespace="team",exported_container="worker",exported_namespace="team",exported_pod="dra-pod",model="P800",pci_bus_id="`+dev5+`",xpu="5"}`))
	dev7 := tr.ComputeDevices()[7].BDF
	require.Equal(t, 1.0, value(t, s, `xpu_healthy{model="P800",pci_bus_id="`+dev7+`",xpu="7"}`))
	require.Len(t, named(s, "xpu_healthy"), 8+1, "8 devices, one of them held by two pods")
	require.Empty(t, named(s, "xpu_healthy", `exported_pod="odd"`))
	for k := range s {
		for _, l := range []string{"pod", "namespace", "container"} {
			require.False(t, strings.Contains(k, "{"+l+`="`) || strings.Contains(k, ","+l+`="`), "%s: the holder labels are exported_*, which a target's own %s label cannot fill", k, l)
		}
	}
	require.Equal(t, 0.0, value(t, s, `xpu_unlisted_holder_pods{model="P800",pci_bus_id="`+busOf3+`",xpu="3"}`))
}

// A kubelet that does not answer costs the pod labels, not the scrape; an
// answer larger than the bound is refused.
func TestAttributionBounds(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		sock := podresourcestest.Serve(t, &podresourcestest.Server{Block: true})
		c, _ := hostCollector(t, fakehost.P800x8(), nil, Config{Pods: podresources.New(sock, podresources.Config{Timeout: 200 * time.Millisecond})})
		start := time.Now()
		s := scrape(t, c)
		require.Less(t, time.Since(start), 5*time.Second)
		require.Equal(t, 0.0, value(t, s, `xpu_exporter_source_up{source="pod-resources"}`))
		require.Len(t, named(s, "xpu_healthy"), 8)
	})
	t.Run("message size", func(t *testing.T) {
		big := listResponse()
		big.PodResources[0].Name = strings.Repeat("p", 64<<10)
		sock := podresourcestest.Serve(t, podresourcestest.NewServer(big))
		_, err := podresources.New(sock, podresources.Config{MaxMessage: 16 << 10}).List(context.Background())
		require.ErrorContains(t, err, "larger than max")
	})
	t.Run("no socket", func(t *testing.T) {
		_, err := podresources.New(t.TempDir()+"/none.sock", podresources.Config{Timeout: time.Second}).List(context.Background())
		require.ErrorContains(t, err, "none.sock")
	})
}
