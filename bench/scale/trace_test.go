package scale

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func TestUtilConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		description string
		env         map[string]string
		want        UtilConfig
		err         string
	}{
		{
			description: "defaults are the CI run",
			want:        UtilConfig{Nodes: 2, Jobs: 20, Seed: 1, Loads: []float64{0.7}, MeanDuration: 2 * time.Second},
		},
		{
			description: "the full run, loads deduplicated",
			env: map[string]string{
				EnvUtilNodes: "8", EnvUtilJobs: "250", EnvUtilSeed: "-3", EnvUtilLoads: "0.7, 1.3,0.7",
				EnvUtilDuration: "10s", EnvUtilOut: "bench",
			},
			want: UtilConfig{Nodes: 8, Jobs: 250, Seed: -3, Loads: []float64{0.7, 1.3}, MeanDuration: 10 * time.Second, Out: "bench"},
		},
		{description: "bad nodes", env: map[string]string{EnvUtilNodes: "0"}, err: EnvUtilNodes + `="0": want a positive whole number`},
		{description: "bad jobs", env: map[string]string{EnvUtilJobs: "many"}, err: EnvUtilJobs + `="many"`},
		{description: "bad seed", env: map[string]string{EnvUtilSeed: "1.5"}, err: EnvUtilSeed + `="1.5": want a whole number`},
		{description: "zero load", env: map[string]string{EnvUtilLoads: "0.7,0"}, err: "loads above 0 and at most 10"},
		{description: "NaN load", env: map[string]string{EnvUtilLoads: "NaN"}, err: "loads above 0 and at most 10"},
		{description: "bad duration", env: map[string]string{EnvUtilDuration: "10"}, err: "from 100ms to 1h"},
		{description: "too short a duration", env: map[string]string{EnvUtilDuration: "1ms"}, err: "from 100ms to 1h"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got, err := UtilConfigFromEnv(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// A trace is the same for the same config, another for another seed, and
// follows the config: the mix, the arrival rate and the mean duration.
func TestNewTrace(t *testing.T) {
	c := TraceConfig{Seed: 7, Jobs: 4000, Nodes: 8, Load: 0.8, MeanDuration: 10 * time.Second, Mix: JobMix{Whole: 1, Half: 1, Quarter: 2}}
	a, err := NewTrace(c)
	require.NoError(t, err)
	b, err := NewTrace(c)
	require.NoError(t, err)
	require.Equal(t, a, b, "same seed, same trace")
	c2 := c
	c2.Seed++
	other, err := NewTrace(c2)
	require.NoError(t, err)
	require.NotEqual(t, a, other)

	bySize := map[int]int{}
	var dur time.Duration
	for i, j := range a {
		require.Equal(t, i, j.ID)
		if i > 0 {
			require.GreaterOrEqual(t, j.Arrival, a[i-1].Arrival)
		}
		require.GreaterOrEqual(t, j.Duration, time.Second, "at least a tenth of the mean")
		bySize[j.VFs]++
		dur += j.Duration
	}
	require.InDelta(t, 0.25, float64(bySize[1])/float64(len(a)), 0.03)
	require.InDelta(t, 0.25, float64(bySize[2])/float64(len(a)), 0.03)
	require.InDelta(t, 0.5, float64(bySize[4])/float64(len(a)), 0.03)
	// 0.8 of 64 cards at half a card per job for 10 s: 10.24 jobs/s.
	require.InDelta(t, 10.24, c.ArrivalRate(), 1e-9)
	rate := float64(len(a)) / a[len(a)-1].Arrival.Seconds()
	require.InDelta(t, c.ArrivalRate(), rate, 0.05*c.ArrivalRate())
	require.InDelta(t, 10, (dur / time.Duration(len(a))).Seconds(), 0.6)

	for _, bad := range []struct {
		change func(*TraceConfig)
		err    string
	}{
		{func(c *TraceConfig) { c.Jobs = 0 }, "0 jobs"},
		{func(c *TraceConfig) { c.Nodes = 0 }, "0 nodes"},
		{func(c *TraceConfig) { c.Load = math.NaN() }, "load NaN"},
		{func(c *TraceConfig) { c.MeanDuration = 0 }, "mean duration 0s"},
		{func(c *TraceConfig) { c.Mix = JobMix{} }, "job mix"},
		{func(c *TraceConfig) { c.Mix = JobMix{Whole: -1, Quarter: 2} }, "job mix"},
	} {
		bc := c
		bad.change(&bc)
		_, err := NewTrace(bc)
		require.ErrorContains(t, err, bad.err)
	}
}

// The static mixes are every split of 8 cards into whole, halves and
// quarters that the P800 driver's 32 handles allow, and nothing else.
func TestStaticMixes(t *testing.T) {
	budget := discover.HandleLimit(discover.GenerationKunlun3)
	require.Equal(t, 32, budget)
	mixes := StaticMixes()
	seen := map[string]bool{}
	for _, l := range mixes {
		require.Len(t, l, CardsPerNode)
		require.LessOrEqual(t, l.handles(), budget, "%s", l)
		require.False(t, seen[l.String()], "%s twice", l)
		seen[l.String()] = true
	}
	require.True(t, seen["8x1"])
	require.True(t, seen["8x2"])
	require.True(t, seen["2x1+6x4"])
	require.True(t, seen["4x2+4x4"], "8 PFs + 8 + 16 VFs = 32 handles fit")
	require.False(t, seen["8x4"], "all=4 takes 40 handles")
	require.False(t, seen["1x1+7x4"])
	require.False(t, seen["3x2+5x4"], "8 + 6 + 20 = 34 handles")
	require.Equal(t, "2x1+6x4", MaxQuarters().String())
	require.Equal(t, "1x1+3x2+4x4", NodeLayout{0, 4, 2, 4, 2, 4, 2, 4}.String())
}

// The offline model: best fit, jobs placed in arrival order with
// backfilling, waits counted until the horizon, utilisation inside the
// window.
func TestSimulate(t *testing.T) {
	s := time.Second
	jobs := []Job{
		{ID: 0, VFs: 4, Arrival: 0, Duration: 10 * s}, // a quarter
		{ID: 1, VFs: 1, Arrival: 1 * s, Duration: 10 * s},
		{ID: 2, VFs: 2, Arrival: 2 * s, Duration: 4 * s},
	}
	span := Span{From: 0, To: 10 * s, Horizon: 20 * s}

	// One node of quarters and whole cards: the quarter job takes a
	// quarter, the whole job a whole card, the half job a whole card too
	// (no half slot): nothing waits.
	r := Simulate(jobs, 1, NodeLayout{4, 0, 0, 0, 4, 4, 4, 4}, span)
	require.Equal(t, 3, r.Placed)
	require.Zero(t, r.P99Wait)
	gib := 24.0*10 + 96*9 + 48*4
	require.InDelta(t, gib/(8*96*10), r.Utilisation, 1e-9)

	// Only quarters: the whole and the half job never fit; they wait to
	// the horizon (19 s and 18 s), the quarter runs.
	r = Simulate(jobs, 1, NodeLayout{4, 4, 4, 4, 4, 4, 0, 0}[:6:6], span)
	require.Equal(t, 1, r.Placed)
	require.Greater(t, r.P99Wait, 18*s)

	// One whole card: the quarter holds it until 10 s, then the whole job
	// (arrived at 1 s, first in line) until 20 s, the horizon: the half
	// (arrived at 2 s) is never placed and waits 18 s.
	one := NodeLayout{0}
	r = Simulate(jobs, 1, one, span)
	require.Equal(t, 2, r.Placed)
	require.Equal(t, 17820*time.Millisecond, r.P99Wait, "p99 of waits 0, 9 and 18 s")
	require.InDelta(t, (24.0*10)/(96*10), r.Utilisation, 1e-9, "only the quarter's 10 s fall in the window")

	// The window cuts what a job holds: From 5 s to 10 s.
	r = Simulate(jobs[:1], 1, one, Span{From: 5 * s, To: 10 * s, Horizon: 20 * s})
	require.InDelta(t, 24.0/96, r.Utilisation, 1e-9)
}

// BestMix picks, for a trace of quarters only, a layout in quarters;
// for whole jobs only, whole cards.
func TestBestMix(t *testing.T) {
	for _, tc := range []struct {
		mix  JobMix
		want string
	}{
		{JobMix{Quarter: 1}, "2x1+6x4"},
		{JobMix{Whole: 1}, "8x1"},
		{JobMix{Half: 1}, "8x2"},
	} {
		c := TraceConfig{Seed: 1, Jobs: 400, Nodes: 2, Load: 1.2, MeanDuration: 5 * time.Second, Mix: tc.mix}
		jobs, err := NewTrace(c)
		require.NoError(t, err)
		best := BestMix(jobs, c.Nodes, SpanOf(jobs, c.MeanDuration))
		require.Equal(t, tc.want, best.Layout.String(), "mix %s", tc.mix)
	}
}

func TestUtilReportWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	rep := &UtilReport{
		Started: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), KubernetesVersion: "v1.37.2", CPUs: 2,
		Config: UtilConfig{Nodes: 8, Jobs: 250, Seed: 1, Loads: []float64{0.7}, MeanDuration: 10 * time.Second},
		Results: []UtilResult{
			{Load: 0.7, Policy: "static all=0", Layout: "8x1", Jobs: 250, Placed: 250, Utilisation: 0.5, ModelUtilisation: 0.52, P50WaitMs: 100, P99WaitMs: 2500},
			{Load: 0.7, Policy: "dynamic", Layout: "dynamic", Jobs: 250, Placed: 249, Waiting: 1, Utilisation: 0.6},
		},
	}
	require.NoError(t, rep.Write(dir))
	md := readFile(t, filepath.Join(dir, "utilization-results.md"))
	require.Contains(t, md, "| static all=0 | 8x1 | 50.0% | 52.0% | 250/250 | 0 | 0.10 | 2.50 |")
	require.Contains(t, md, "| dynamic | dynamic | 60.0% | - | 249/250 | 1 |")
	require.Contains(t, readFile(t, filepath.Join(dir, "utilization-results.json")), `"policy": "dynamic"`)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
