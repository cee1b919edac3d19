package exporter

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
)

// A pod holding the device plugin's renamed resource (the sharing
// configuration's rename: example.com/xpu-ts) is attributed once the
// exporter reads the plugin's file (--config-file); without it, the XPU
// looks free.
func TestRenamedResourceAttributed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: baidu.com/xpu\n        replicas: 4\n        rename: example.com/xpu-ts\n"), 0o644))
	sock := podresourcestest.Serve(t, podresourcestest.NewServer(&podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
		podresourcestest.DevicePluginPod("ml", "ts", "main", "example.com/xpu-ts", "2::1"),
	}}))
	held := func(cfg podresources.Config) map[string]float64 {
		c, tr := hostCollector(t, fakehost.P800x8(), nil, Config{Pods: podresources.New(sock, cfg)})
		bus := tr.Devices[2].BDF
		return named(scrape(t, c), "xpu_memory_total_bytes", `pci_bus_id="`+bus+`"`, `pod="ts"`)
	}
	require.Empty(t, held(podresources.Config{}), "the rename is not known without the file")
	cfg, err := podresources.Config{}.WithSharingFile(file)
	require.NoError(t, err)
	require.Len(t, held(cfg), 1, "the pod holding example.com/xpu-ts is attributed")
}
