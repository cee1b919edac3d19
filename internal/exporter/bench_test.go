package exporter

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
)

// BenchmarkScrape8XPUs is one scrape of a P800 host with 8 XPUs, the fake
// xpu-smi included (a real process per scrape), with attribution through a
// PodResources server of the real API types: 8 pods, one XPU each (half by
// the device plugin, half by DRA claims), among 40 pods without XPUs. It
// reports the median scrape ("ms-median"; the target is under 50 ms) beside
// Go's mean, and the first scrape, which also asks xpu-smi -i N -q for each
// index.
func BenchmarkScrape8XPUs(b *testing.B) {
	resp := &podresourcesapi.ListPodResourcesResponse{}
	for i := range 48 {
		c := &podresourcesapi.ContainerResources{Name: "main"}
		switch {
		case i < 4:
			c.Devices = pluginDevs("baidu.com/xpu", fmt.Sprint(i))
		case i < 8:
			c.DynamicResources = []*podresourcesapi.DynamicResource{claim(fmt.Sprintf("claim-%d", i), "ml", "xpu.baidu.com", fmt.Sprintf("xpu-%d", i))}
		default:
			c.Devices = pluginDevs("example.com/nic", fmt.Sprint(i))
		}
		resp.PodResources = append(resp.PodResources, &podresourcesapi.PodResources{Name: fmt.Sprintf("pod-%d", i), Namespace: "ml", Containers: []*podresourcesapi.ContainerResources{c}})
	}
	sock := podresourcestest.Serve(b, podresourcestest.NewServer(resp))
	c, _ := hostCollector(b, fakehost.P800x8(), func(*fakehost.Tree, *fakehost.XPUSMIState) {}, Config{Pods: podresources.New(sock, podresources.Config{})})
	reg := prometheus.NewRegistry()
	require.NoError(b, reg.Register(c))
	gather := func() time.Duration {
		start := time.Now()
		mfs, err := reg.Gather()
		if err != nil || len(mfs) == 0 {
			b.Fatalf("gather: %v", err)
		}
		return time.Since(start)
	}
	first := gather()
	s := scrape(b, c)
	require.Len(b, named(s, "xpu_memory_used_bytes", `exported_pod="`), 8)

	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		durations = append(durations, gather())
	}
	b.StopTimer()
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(first.Microseconds())/1000, "ms-first")
}
