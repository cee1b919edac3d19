package exporter

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
)

func TestHolders(t *testing.T) {
	for _, tc := range []struct {
		description string
		owners      []podresources.Owner
		maxPods     int
		want        []podresources.Owner
		unlisted    int
	}{
		{description: "nobody"},
		{
			description: "one container", maxPods: 2,
			owners: []podresources.Owner{{Namespace: "ml", Pod: "a", Container: "main"}},
			want:   []podresources.Owner{{Namespace: "ml", Pod: "a", Container: "main"}},
		},
		{
			description: "a pod's containers fold into one holder without a container", maxPods: 2,
			owners: []podresources.Owner{{Namespace: "ml", Pod: "a", Container: "main", Claim: "c", ClaimNamespace: "ml"}, {Namespace: "ml", Pod: "a", Container: "side", Claim: "c", ClaimNamespace: "ml"}},
			want:   []podresources.Owner{{Namespace: "ml", Pod: "a", Claim: "c", ClaimNamespace: "ml"}},
		},
		{
			description: "containers of two claims: no claim either", maxPods: 2,
			owners: []podresources.Owner{{Namespace: "ml", Pod: "a", Container: "main", Claim: "c", ClaimNamespace: "ml"}, {Namespace: "ml", Pod: "a", Container: "main", Claim: "d", ClaimNamespace: "ml"}},
			want:   []podresources.Owner{{Namespace: "ml", Pod: "a", Container: "main"}},
		},
		{
			description: "past the bound, the first pods by namespace and name", maxPods: 2,
			owners: []podresources.Owner{{Namespace: "b", Pod: "x", Container: "c"}, {Namespace: "a", Pod: "z", Container: "c"}, {Namespace: "a", Pod: "y", Container: "c"}, {Namespace: "a", Pod: "y", Container: "d"}},
			want:   []podresources.Owner{{Namespace: "a", Pod: "y"}, {Namespace: "a", Pod: "z", Container: "c"}}, unlisted: 1,
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got, unlisted := holders(tc.owners, tc.maxPods)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.unlisted, unlisted)
		})
	}
}

// One XPU in one shared DRA claim referenced by 110 pods of 50 containers
// each: at most MaxPodsPerXPU series per metric for it (one per pod, the
// containers folded), the other pods counted in xpu_unlisted_holder_pods.
// Unbounded, it was 5500 series per metric.
func TestHoldersBoundSeries(t *testing.T) {
	resp := &podresourcesapi.ListPodResourcesResponse{}
	for p := range 110 {
		pod := &podresourcesapi.PodResources{Name: fmt.Sprintf("pod-%03d", p), Namespace: "tenant"}
		for c := range 50 {
			pod.Containers = append(pod.Containers, containerWith(fmt.Sprintf("c%02d", c), nil, []*podresourcesapi.DynamicResource{claim("shared", "tenant", "xpu.baidu.com", "xpu-3")}))
		}
		resp.PodResources = append(resp.PodResources, pod)
	}
	resp.PodResources = append(resp.PodResources, &podresourcesapi.PodResources{Name: "alone", Namespace: "ml", Containers: []*podresourcesapi.ContainerResources{
		containerWith("main", pluginDevs("baidu.com/xpu", "0"), nil),
	}})
	sock := podresourcestest.Serve(t, podresourcestest.NewServer(resp))
	c, tr := hostCollector(t, fakehost.P800x8(), nil, Config{NoXPUSMI: true, Pods: podresources.New(sock, podresources.Config{}), MaxPodsPerXPU: 8})
	s := scrape(t, c)
	bus3, bus0 := tr.ComputeDevices()[3].BDF, tr.ComputeDevices()[0].BDF
	held := named(s, "xpu_healthy", `xpu="3"`)
	require.Len(t, held, 8)
	for p := range 8 {
		require.Contains(t, held, fmt.Sprintf(`xpu_healthy{claim="shared",claim_namespace="tenant",exported_namespace="tenant",exported_pod="pod-%03d",model="P800",pci_bus_id="%s",xpu="3"}`, p, bus3))
	}
	require.Equal(t, 102.0, value(t, s, `xpu_unlisted_holder_pods{model="P800",pci_bus_id="`+bus3+`",xpu="3"}`))
	require.Equal(t, 0.0, value(t, s, `xpu_unlisted_holder_pods{model="P800",pci_bus_id="`+bus0+`",xpu="0"}`))
	require.Contains(t, s, `xpu_healthy{exported_container="main",exported_namespace="ml",exported_pod="alone",model="P800",pci_bus_id="`+bus0+`",xpu="0"}`)
	require.Less(t, len(s), 100, "the scrape's series")
}
