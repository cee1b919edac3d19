package scale

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
)

// Environment of TestUtilization (make bench-utilization UTIL_NODES=...
// UTIL_JOBS=... UTIL_SEED=... UTIL_LOADS=... UTIL_DURATION=... OUT=...).
const (
	EnvUtilNodes = "XPU_UTIL_NODES"
	// EnvUtilJobs is the number of jobs of each load's trace.
	EnvUtilJobs = "XPU_UTIL_JOBS"
	EnvUtilSeed = "XPU_UTIL_SEED"
	// EnvUtilLoads is a comma-separated list of offered loads (1 is
	// saturation).
	EnvUtilLoads = "XPU_UTIL_LOADS"
	// EnvUtilDuration is the jobs' mean duration (a Go duration, 10s).
	EnvUtilDuration = "XPU_UTIL_DURATION"
	// EnvUtilOut is the directory of utilization-results.md and .json;
	// empty means a temporary directory of the test.
	EnvUtilOut = "XPU_UTIL_OUT"
)

// Defaults: the small run of CI (make bench-utilization sets the full one).
const (
	DefaultUtilNodes    = 2
	DefaultUtilJobs     = 20
	DefaultUtilSeed     = 1
	DefaultUtilLoads    = "0.7"
	DefaultUtilDuration = 2 * time.Second
)

// The job mixes: this week's trace, and last week's, which the "tuned for
// last week" layout is chosen for.
var (
	ThisWeek = JobMix{Whole: 25, Half: 25, Quarter: 50}
	LastWeek = JobMix{Whole: 50, Half: 30, Quarter: 20}
)

// lastWeekSeed is added to the seed for last week's trace: another trace,
// not this week's with other sizes.
const lastWeekSeed = 1000

// UtilConfig is one invocation of the utilisation benchmark.
type UtilConfig struct {
	Nodes        int
	Jobs         int
	Seed         int64
	Loads        []float64
	MeanDuration time.Duration
	Out          string
}

// UtilConfigFromEnv reads UtilConfig from the environment (getenv is
// os.Getenv outside tests), with the CI defaults for what is not set.
func UtilConfigFromEnv(getenv func(string) string) (UtilConfig, error) {
	c := UtilConfig{Nodes: DefaultUtilNodes, Jobs: DefaultUtilJobs, Seed: DefaultUtilSeed, MeanDuration: DefaultUtilDuration, Out: getenv(EnvUtilOut)}
	positive := func(name string, dst *int) error {
		v := getenv(name)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%s=%q: want a positive whole number", name, v)
		}
		*dst = n
		return nil
	}
	if err := positive(EnvUtilNodes, &c.Nodes); err != nil {
		return c, err
	}
	if err := positive(EnvUtilJobs, &c.Jobs); err != nil {
		return c, err
	}
	if v := getenv(EnvUtilSeed); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("%s=%q: want a whole number", EnvUtilSeed, v)
		}
		c.Seed = n
	}
	loads := getenv(EnvUtilLoads)
	if loads == "" {
		loads = DefaultUtilLoads
	}
	for _, f := range strings.Split(loads, ",") {
		l, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(l > 0) || l > 10 {
			return c, fmt.Errorf("%s=%q: want a comma-separated list of loads above 0 and at most 10, e.g. 0.7,1.3", EnvUtilLoads, loads)
		}
		if !slices.Contains(c.Loads, l) {
			c.Loads = append(c.Loads, l)
		}
	}
	if v := getenv(EnvUtilDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond || d > time.Hour {
			return c, fmt.Errorf("%s=%q: want a mean job duration from 100ms to 1h, e.g. 10s", EnvUtilDuration, v)
		}
		c.MeanDuration = d
	}
	return c, nil
}

// Trace is the TraceConfig of load l's trace (this week's mix, or last
// week's with its own seed).
func (c UtilConfig) Trace(load float64, lastWeek bool) TraceConfig {
	t := TraceConfig{Seed: c.Seed, Jobs: c.Jobs, Nodes: c.Nodes, Load: load, MeanDuration: c.MeanDuration, Mix: ThisWeek}
	if lastWeek {
		t.Seed += lastWeekSeed
		t.Mix = LastWeek
	}
	return t
}

// UtilResult is one policy at one load: one object of
// utilization-results.json.
type UtilResult struct {
	Load   float64 `json:"load"`
	Policy string  `json:"policy"`
	// Layout is the static layout of every node ("dynamic" for dynamic).
	Layout string `json:"layout"`
	Nodes  int    `json:"nodes"`
	Jobs   int    `json:"jobs"`
	// Placed is the jobs bound before the horizon.
	Placed int `json:"placed"`
	// Utilisation is requested GiB-seconds (each placed job's 96/48/24
	// GiB from its binding to its deletion) over capacity GiB-seconds (96
	// GiB per card), both within the span's window (Span: after the
	// warm-up, until the last arrival).
	Utilisation float64 `json:"utilisation"`
	// ModelUtilisation is the offline model's figure for the layout (0
	// for dynamic).
	ModelUtilisation float64 `json:"modelUtilisation,omitempty"`
	// Waits from arrival (creation request) to binding seen by a watch; a
	// job still waiting at the horizon counts its wait until then.
	P50WaitMs float64 `json:"p50WaitMs"`
	P99WaitMs float64 `json:"p99WaitMs"`
	// Waiting is the jobs that arrived and were not bound at the horizon.
	Waiting int `json:"waiting"`
	// BySize: jobs placed per size, and the share of them that took a
	// device larger than they asked for.
	PlacedBySize map[string]int `json:"placedBySize"`
	LargerSlot   int            `json:"largerSlot"`
	// Scheduler CPU (utime+stime) over the run, and per job placed.
	SchedulerCPUSeconds float64 `json:"schedulerCPUSeconds"`
	SchedulerCPUPerPod  float64 `json:"schedulerCPUMsPerPod"`
	HorizonSeconds      float64 `json:"horizonSeconds"`
	WindowFromSeconds   float64 `json:"windowFromSeconds"`
	WindowToSeconds     float64 `json:"windowToSeconds"`
	Load1               float64 `json:"load1"`
}

// UtilReport is one run of the utilisation benchmark.
type UtilReport struct {
	Started           time.Time
	KubernetesVersion string
	CPUs              int
	Config            UtilConfig
	Results           []UtilResult
	Notes             []string
}

// Write writes utilization-results.json and .md into dir, replacing
// earlier ones whole.
func (r *UtilReport) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	js, err := json.MarshalIndent(r.Results, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the results: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "utilization-results.json"), append(js, '\n'), atomicfile.WithPerm(0o644)); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "utilization-results.md"), []byte(r.Markdown()), atomicfile.WithPerm(0o644))
}

// Markdown renders the report: one table per load.
func (r *UtilReport) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "# Utilisation: static layouts vs dynamic partitions (make bench-utilization)\n\n")
	fmt.Fprintf(&b, "Run of %s, Kubernetes %s control plane, %d CPUs. %d nodes of %d P800 (%d cards), %d jobs per load, seed %d, "+
		"mean duration %s, mix whole/half/quarter %s (last week's: %s). Utilisation: requested GiB-s over capacity GiB-s "+
		"from one mean duration after the start (warm-up) to the last arrival; the run ends one mean duration after it (horizon). Wait: arrival to binding; a job still waiting at the horizon counts until then.\n\n",
		r.Started.UTC().Format(time.RFC3339), r.KubernetesVersion, r.CPUs, c.Nodes, CardsPerNode, c.Nodes*CardsPerNode, c.Jobs, c.Seed,
		c.MeanDuration, ThisWeek, LastWeek)
	var loads []float64
	for _, res := range r.Results {
		if !slices.Contains(loads, res.Load) {
			loads = append(loads, res.Load)
		}
	}
	for _, l := range loads {
		fmt.Fprintf(&b, "## Load %.2f\n\n", l)
		b.WriteString("| policy | node layout | utilisation | (model) | jobs placed | waiting at horizon | p50 wait s | p99 wait s | in a larger slot | scheduler CPU ms/pod | load |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, res := range r.Results {
			if res.Load != l {
				continue
			}
			model := "-"
			if res.ModelUtilisation > 0 {
				model = fmt.Sprintf("%.1f%%", 100*res.ModelUtilisation)
			}
			fmt.Fprintf(&b, "| %s | %s | %.1f%% | %s | %d/%d | %d | %.2f | %.2f | %d | %.1f | %.1f |\n",
				res.Policy, res.Layout, 100*res.Utilisation, model, res.Placed, res.Jobs, res.Waiting,
				res.P50WaitMs/1000, res.P99WaitMs/1000, res.LargerSlot, res.SchedulerCPUPerPod, res.Load1)
		}
		b.WriteString("\n")
	}
	for _, note := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", note)
	}
	return b.String()
}

// utilisation is requested GiB-seconds over the capacity's (cards of
// CardGiB) over window.
func utilisation(gibSeconds float64, cards int, window time.Duration) float64 {
	capacity := float64(cards*CardGiB) * window.Seconds()
	if capacity <= 0 {
		return math.NaN()
	}
	return gibSeconds / capacity
}
