package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
)

// HealthCase is the case name of the entries of the health change.
const HealthCase = "health"

// Result is one case at one node count (or, with Case HealthCase, the
// health change of that node count): one object of scale-results.json.
type Result struct {
	Case  string `json:"case"`
	Title string `json:"title"`
	Nodes int    `json:"nodes"`
	Pods  int    `json:"pods"`
	Bound int    `json:"bound"`
	// PodsPerSecond is Bound over the time from the first pod's creation
	// to the last binding; P50Ms and P99Ms are per pod, creation request
	// sent to binding seen by a watch.
	PodsPerSecond float64 `json:"podsPerSecond"`
	P50Ms         float64 `json:"p50Ms"`
	P99Ms         float64 `json:"p99Ms"`
	// RatioToA is PodsPerSecond over case (a)'s of the same node count
	// (0 when (a) did not run).
	RatioToA float64 `json:"ratioToA,omitempty"`
	// CPU seconds used during the case, and the peak RSS during it.
	SchedulerCPUSeconds         float64 `json:"schedulerCPUSeconds"`
	SchedulerPeakRSSBytes       int64   `json:"schedulerPeakRSSBytes"`
	APIServerCPUSeconds         float64 `json:"apiserverCPUSeconds"`
	APIServerPeakRSSBytes       int64   `json:"apiserverPeakRSSBytes"`
	ControllerManagerCPUSeconds float64 `json:"controllerManagerCPUSeconds"`
	// EtcdDBBytes is etcd_mvcc_db_total_size_in_bytes after the case
	// (EtcdDBInUseBytes: ..._in_use_...).
	EtcdDBBytes      int64 `json:"etcdDBBytes"`
	EtcdDBInUseBytes int64 `json:"etcdDBInUseBytes"`
	// ResourceSlices and ResourceSliceBytes: the slices in the cluster
	// and the size of their JSON as the API server serves them.
	ResourceSlices     int   `json:"resourceSlices"`
	ResourceSliceBytes int64 `json:"resourceSliceBytes"`
	// Load1 is the machine's 1-minute load average at the end.
	Load1 float64 `json:"load1"`
	// The health change: one XPU of every node tainted, then untainted,
	// by the driver's slice code; API writes (updates of slices,
	// conflicts retried included) and the time from the first write until
	// a watch saw the change in every slice.
	TaintWrites    int     `json:"taintWrites,omitempty"`
	TaintSeconds   float64 `json:"taintSeconds,omitempty"`
	UntaintWrites  int     `json:"untaintWrites,omitempty"`
	UntaintSeconds float64 `json:"untaintSeconds,omitempty"`
}

// Report is one run of the benchmark.
type Report struct {
	Started           time.Time
	KubernetesVersion string
	CPUs              int
	Results           []Result
	// Notes are printed under the tables (how busy the machine was, ...).
	Notes []string
}

// fillRatios sets RatioToA of every DRA result whose node count has an (a).
func (r *Report) fillRatios() {
	for i := range r.Results {
		res := &r.Results[i]
		if res.Case == "a" || res.Case == HealthCase {
			continue
		}
		j := slices.IndexFunc(r.Results, func(o Result) bool { return o.Case == "a" && o.Nodes == res.Nodes })
		if j >= 0 && r.Results[j].PodsPerSecond > 0 {
			res.RatioToA = res.PodsPerSecond / r.Results[j].PodsPerSecond
		}
	}
}

// Write writes scale-results.json (the list of results) and
// scale-results.md into dir, replacing earlier ones whole.
func (r *Report) Write(dir string) error {
	r.fillRatios()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	js, err := json.MarshalIndent(r.Results, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the results: %w", err)
	}
	// Replaced whole: a reader never sees half a report.
	if err := atomicfile.WriteFile(filepath.Join(dir, "scale-results.json"), append(js, '\n'), atomicfile.WithPerm(0o644)); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "scale-results.md"), []byte(r.Markdown()), atomicfile.WithPerm(0o644))
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// Markdown renders the report: one table of cases per node count, then the
// health changes.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Scheduling at scale (make bench-scale)\n\n")
	fmt.Fprintf(&b, "Run of %s, Kubernetes %s control plane, %d CPUs. Simulated nodes: Node objects without kubelet, "+
		"each with the ResourceSlice xpu-dra-driver publishes for a fake 8-card P800 host. Latency: creation request "+
		"to binding seen by a watch. CPU and peak RSS: during the case. Ratio: pods/s over case (a)'s at the same node count.\n\n",
		r.Started.UTC().Format(time.RFC3339), r.KubernetesVersion, r.CPUs)
	var nodes []int
	for _, res := range r.Results {
		if !slices.Contains(nodes, res.Nodes) {
			nodes = append(nodes, res.Nodes)
		}
	}
	for _, n := range nodes {
		fmt.Fprintf(&b, "## %d nodes\n\n", n)
		b.WriteString("| case | pods bound | pods/s | ratio to (a) | p50 ms | p99 ms | scheduler CPU s | scheduler peak RSS MiB | API server CPU s | API server peak RSS MiB | controller manager CPU s | etcd DB MiB (in use) | slices | slice bytes | load |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, res := range r.Results {
			if res.Nodes != n || res.Case == HealthCase {
				continue
			}
			ratio := "-"
			if res.RatioToA > 0 {
				ratio = fmt.Sprintf("%.2f", res.RatioToA)
			}
			fmt.Fprintf(&b, "| (%s) %s | %d/%d | %.1f | %s | %.0f | %.0f | %.1f | %s | %.1f | %s | %.1f | %s (%s) | %d | %d | %.1f |\n",
				res.Case, res.Title, res.Bound, res.Pods, res.PodsPerSecond, ratio, res.P50Ms, res.P99Ms,
				res.SchedulerCPUSeconds, mib(res.SchedulerPeakRSSBytes), res.APIServerCPUSeconds, mib(res.APIServerPeakRSSBytes),
				res.ControllerManagerCPUSeconds, mib(res.EtcdDBBytes), mib(res.EtcdDBInUseBytes), res.ResourceSlices, res.ResourceSliceBytes, res.Load1)
		}
		for _, res := range r.Results {
			if res.Nodes == n && res.Case == HealthCase {
				fmt.Fprintf(&b, "\nHealth change (one XPU of each of the %d nodes): taint %d writes, every slice tainted after %.2f s; "+
					"untaint %d writes, %.2f s. API server CPU %.1f s.\n", n, res.TaintWrites, res.TaintSeconds, res.UntaintWrites, res.UntaintSeconds, res.APIServerCPUSeconds)
			}
		}
		b.WriteString("\n")
	}
	for _, note := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", note)
	}
	return b.String()
}
