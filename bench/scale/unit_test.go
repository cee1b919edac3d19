package scale

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		description string
		env         map[string]string
		want        Config
		err         string
	}{
		{description: "defaults are the CI run", want: Config{Nodes: []int{50}, Pods: 200, Cases: []string{"a", "b"}}},
		{
			description: "a sweep, cases sorted and deduplicated",
			env:         map[string]string{EnvNodes: "100, 300,1000", EnvPods: "400", EnvCases: "e,B,a,b", EnvOut: "bench"},
			want:        Config{Nodes: []int{100, 300, 1000}, Pods: 400, Cases: []string{"a", "b", "e"}, Out: "bench"},
		},
		{description: "unknown case", env: map[string]string{EnvCases: "a,z"}, err: `unknown case "z"`},
		{description: "bad node count", env: map[string]string{EnvNodes: "10,x"}, err: "positive node counts"},
		{description: "bad pods", env: map[string]string{EnvPods: "0"}, err: "positive number of pods"},
		{description: "more pods than case c fits", env: map[string]string{EnvNodes: "10", EnvPods: "41", EnvCases: "c"}, err: "case c fits at most 40 pods"},
		{description: "case f fits 16 per node", env: map[string]string{EnvNodes: "10", EnvPods: "160", EnvCases: "f"}, want: Config{Nodes: []int{10}, Pods: 160, Cases: []string{"f"}}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestReadProcUsage(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Join(proc, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(proc, pid, name), []byte(content), 0o644))
	}
	// Field 2 with a space and a parenthesis; utime 250, stime 50 ticks; the
	// 30 fields after rss as zeros (the kernel writes 52 in all).
	rest := strings.Repeat(" 0", 30)
	write("4242", "stat", "4242 (kube sched) uler) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 0 0"+rest+"\n")
	write("4242", "status", "Name:\tkube-scheduler\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 40000 kB\n")
	u, err := ReadProcUsage(proc, 4242)
	require.NoError(t, err)
	require.InDelta(t, 3.0, u.CPUSeconds, 1e-9)
	require.Equal(t, int64(50<<20), u.PeakRSSBytes)

	write("4243", "stat", "4243 (x) S 1 2")
	write("4243", "status", "Name:\tx\nVmHWM:\t 1 kB\n")
	_, err = ReadProcUsage(proc, 4243)
	require.ErrorContains(t, err, "CPU time of process 4243")

	write("4244", "stat", "4244 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 7 9 0 0 20 0 1 0 3 0 0"+rest+"\n")
	write("4244", "status", "Name:\tkthreadd\n")
	_, err = ReadProcUsage(proc, 4244)
	require.ErrorContains(t, err, "no VmHWM")

	_, err = ReadProcUsage(proc, 4245)
	require.ErrorContains(t, err, "process 4245")

	// This process: a real /proc answers.
	u, err = ReadProcUsage("/proc", os.Getpid())
	require.NoError(t, err)
	require.Positive(t, u.PeakRSSBytes)
}

func TestLatencies(t *testing.T) {
	t0 := time.Unix(1000, 0)
	created := map[string]time.Time{"p0": t0, "p1": t0.Add(time.Second), "p2": t0.Add(2 * time.Second)}
	bound := map[string]time.Time{"p0": t0.Add(100 * time.Millisecond), "p1": t0.Add(1300 * time.Millisecond)}
	lat, first, last := latencies(created, bound)
	require.Equal(t, []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}, lat)
	require.Equal(t, t0, first)
	require.Equal(t, t0.Add(1300*time.Millisecond), last)
}

func TestReportWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	rep := &Report{Started: time.Unix(0, 0), KubernetesVersion: "v1.37.2", CPUs: 2, Results: []Result{
		{Case: "a", Nodes: 50, Pods: 200, Bound: 200, PodsPerSecond: 100},
		{Case: "b", Nodes: 50, Pods: 200, Bound: 200, PodsPerSecond: 40},
		{Case: HealthCase, Nodes: 50, TaintWrites: 50, TaintSeconds: 1.5, UntaintWrites: 50, UntaintSeconds: 1.2},
	}, Notes: []string{"load average at the start: 3.0"}}
	require.NoError(t, rep.Write(dir))
	data, err := os.ReadFile(filepath.Join(dir, "scale-results.json"))
	require.NoError(t, err)
	var back []map[string]any
	require.NoError(t, json.Unmarshal(data, &back))
	require.Len(t, back, 3)
	for _, k := range []string{"case", "nodes", "pods", "bound", "podsPerSecond", "p50Ms", "p99Ms"} {
		require.Contains(t, back[1], k)
	}
	require.InDelta(t, 0.4, back[1]["ratioToA"], 1e-9)
	md, err := os.ReadFile(filepath.Join(dir, "scale-results.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "## 50 nodes")
	require.Contains(t, string(md), "| 0.40 |")
	require.Contains(t, string(md), "taint 50 writes, every slice tainted after 1.50 s")
}

// The slices the simulated nodes get are the driver's for the fake hosts:
// 8 P800s; dynamic mode's 56 devices on 9 counter sets (16 of them 48 GiB
// halves); a static layout per card; a spec without xpu0 taints xpu-0.
func TestSimulatedSlices(t *testing.T) {
	p800 := newFakeHost(t, fakehost.P800Sysfs())
	d := p800.driver(t, NodeName(7), dra.PartitionsStatic)
	require.True(t, d.Refresh())
	s := d.Slices()[0]
	require.Equal(t, NodeName(7), *s.Spec.NodeName)
	require.Len(t, s.Spec.Devices, DevicesPerNode)
	require.Equal(t, "P800", *s.Spec.Devices[0].Attributes["model"].StringValue)
	require.Equal(t, "Kunlun3", *s.Spec.Devices[0].Attributes["family"].StringValue)
	require.Empty(t, s.Spec.Devices[0].Taints)

	p800.writeSpec(t, false)
	require.True(t, d.Refresh())
	s = d.Slices()[0]
	require.Len(t, s.Spec.Devices[0].Taints, 1)
	require.Equal(t, d.TaintKey(), s.Spec.Devices[0].Taints[0].Key)
	require.Empty(t, s.Spec.Devices[1].Taints)
	p800.writeSpec(t, true)
	require.True(t, d.Refresh())
	require.Empty(t, d.Slices()[0].Spec.Devices[0].Taints)

	whole := newFakeHost(t, sriovP800x8())
	d = whole.driver(t, NodeName(0), dra.PartitionsDynamic)
	require.True(t, d.Refresh())
	var devs []resourceapi.Device
	sets, groups := 0, 0
	for _, s := range d.Slices() {
		devs = append(devs, s.Spec.Devices...)
		sets += len(s.Spec.SharedCounters)
	}
	require.Len(t, devs, DynamicDevicesPerNode)
	require.Equal(t, 8+1, sets, "a counter set per card and the handles'")
	halves := 0
	for _, dev := range devs {
		for _, c := range dev.ConsumesCounters {
			groups += len(c.CompatibilityGroups)
		}
		if capacityGiB(dev) == 48 {
			halves++
		}
	}
	require.Equal(t, PartitionsPerNode, halves)
	require.Equal(t, 8*(2+4), groups, "every slot has its count's group")

	cut, err := sriovP800x8().WithCardVFs(NodeLayout{0, 0, 2, 2, 4, 4, 4, 4})
	require.NoError(t, err)
	d = newFakeHost(t, cut).driver(t, NodeName(0), dra.PartitionsStatic)
	require.True(t, d.Refresh())
	bySize := map[int]int{}
	for _, dev := range d.Slices()[0].Spec.Devices {
		bySize[capacityGiB(dev)]++
	}
	require.Equal(t, map[int]int{96: 2, 48: 4, 24: 16}, bySize)
}

func TestEtcdDBSize(t *testing.T) {
	body := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
	defer srv.Close()

	body = "# HELP etcd_mvcc_db_total_size_in_bytes Total size of the underlying database physically allocated in bytes.\n" +
		"# TYPE etcd_mvcc_db_total_size_in_bytes gauge\netcd_mvcc_db_total_size_in_bytes 2.097152e+06\n" +
		"# TYPE etcd_mvcc_db_total_size_in_use_in_bytes gauge\netcd_mvcc_db_total_size_in_use_in_bytes 1.048576e+06\n" +
		"# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n"
	total, inUse, err := etcdDBSize(t.Context(), srv.URL)
	require.NoError(t, err)
	require.Equal(t, int64(2<<20), total)
	require.Equal(t, int64(1<<20), inUse)

	body = "# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n"
	_, _, err = etcdDBSize(t.Context(), srv.URL)
	require.ErrorContains(t, err, "no gauge etcd_mvcc_db_total_size_in_bytes")

	body = "etcd_mvcc_db_total_size_in_bytes two\n"
	_, _, err = etcdDBSize(t.Context(), srv.URL)
	require.ErrorContains(t, err, "reading etcd's metrics")
}

// forEach runs every index once, never more than writers at once, and
// returns the error of a failing call.
func TestForEach(t *testing.T) {
	var (
		mu            sync.Mutex
		running, peak int
	)
	seen := make([]atomic.Int64, 3*writers)
	require.NoError(t, forEach(len(seen), func(i int) error {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		seen[i].Add(1)
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}))
	for i := range seen {
		require.Equal(t, int64(1), seen[i].Load(), "index %d", i)
	}
	require.LessOrEqual(t, peak, writers)

	errBoom := errors.New("boom")
	require.ErrorIs(t, forEach(5, func(i int) error {
		if i == 3 {
			return errBoom
		}
		return nil
	}), errBoom)
}
