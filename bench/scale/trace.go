package scale

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/benchstat"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// This file is the trace of make bench-utilization and its offline model:
// jobs of a whole, half or quarter P800 arriving as a Poisson process, and
// a simulation of the same trace over a static layout, used to choose the
// hindsight-best layout (and last week's) before the cluster runs.

// CardGiB is a P800's memory (98304 MiB), what a whole-card job asks for.
const CardGiB = 96

// CardsPerNode is the card count of every simulated node.
const CardsPerNode = DevicesPerNode

// Job is one job of a trace: it asks for a 1/VFs card (VFs 1, 2 or 4),
// arrives at Arrival after the start and, once placed, holds its device
// for Duration.
type Job struct {
	ID       int           `json:"id"`
	VFs      int           `json:"vfs"`
	Arrival  time.Duration `json:"arrival"`
	Duration time.Duration `json:"duration"`
}

// GiB is the memory the job asks for at least: 96, 48 or 24.
func (j Job) GiB() int { return CardGiB / j.VFs }

// SizeName is the job's size: whole, half or quarter.
func (j Job) SizeName() string { return sizeName(j.VFs) }

func sizeName(vfs int) string {
	switch vfs {
	case 1:
		return "whole"
	case 2:
		return "half"
	case 4:
		return "quarter"
	}
	return fmt.Sprintf("1/%d", vfs)
}

// JobMix is the share of whole, half and quarter jobs (any positive
// weights; they are normalised).
type JobMix struct {
	Whole, Half, Quarter float64
}

func (m JobMix) String() string {
	return fmt.Sprintf("%.0f/%.0f/%.0f%%", 100*m.Whole/m.total(), 100*m.Half/m.total(), 100*m.Quarter/m.total())
}

func (m JobMix) total() float64 { return m.Whole + m.Half + m.Quarter }

// meanCards is the mean share of a card a job asks for.
func (m JobMix) meanCards() float64 { return (m.Whole + m.Half/2 + m.Quarter/4) / m.total() }

func (m JobMix) valid() bool {
	return m.Whole >= 0 && m.Half >= 0 && m.Quarter >= 0 && m.total() > 0 && !math.IsInf(m.total(), 0)
}

// TraceConfig is what a trace is generated from.
type TraceConfig struct {
	Seed int64
	Jobs int
	// Nodes sets the capacity the load is relative to (CardsPerNode
	// cards each).
	Nodes int
	// Load is the offered load: the card-time the jobs ask for over the
	// capacity's, per unit of time (1 is saturation of a perfect packing).
	Load         float64
	MeanDuration time.Duration
	Mix          JobMix
}

// ArrivalRate is the jobs per second that make the offered load.
func (c TraceConfig) ArrivalRate() float64 {
	return c.Load * float64(c.Nodes*CardsPerNode) / (c.Mix.meanCards() * c.MeanDuration.Seconds())
}

// NewTrace generates the trace of c: sizes drawn from the mix,
// exponential inter-arrival times at ArrivalRate, exponential durations of
// mean MeanDuration (at least a tenth of it, so that no job is shorter
// than the scheduler's latency). The same config gives the same trace.
func NewTrace(c TraceConfig) ([]Job, error) {
	switch {
	case c.Jobs < 1:
		return nil, fmt.Errorf("trace: %d jobs, want at least 1", c.Jobs)
	case c.Nodes < 1:
		return nil, fmt.Errorf("trace: %d nodes, want at least 1", c.Nodes)
	case !(c.Load > 0) || math.IsInf(c.Load, 0):
		return nil, fmt.Errorf("trace: load %v, want a positive number", c.Load)
	case c.MeanDuration <= 0:
		return nil, fmt.Errorf("trace: mean duration %s, want a positive one", c.MeanDuration)
	case !c.Mix.valid():
		return nil, fmt.Errorf("trace: job mix %+v, want non-negative weights, not all 0", c.Mix)
	}
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x7870752d636469)) //nolint:gosec // a benchmark's reproducible trace, not a secret
	rate := c.ArrivalRate()
	jobs := make([]Job, c.Jobs)
	var at float64
	for i := range jobs {
		at += rng.ExpFloat64() / rate
		vfs := 4
		switch u := rng.Float64() * c.Mix.total(); {
		case u < c.Mix.Whole:
			vfs = 1
		case u < c.Mix.Whole+c.Mix.Half:
			vfs = 2
		}
		d := max(rng.ExpFloat64(), 0.1) * c.MeanDuration.Seconds()
		jobs[i] = Job{ID: i, VFs: vfs, Arrival: seconds(at), Duration: seconds(d)}
	}
	return jobs, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Span is the time frame of a run of a trace: it ends at Horizon, the last
// arrival plus the mean duration (what is not placed by then counts as
// not placed); utilisation is measured from From to To, after the warm-up
// of one mean duration (the cluster starts empty) and until the last
// arrival (after it the cluster drains).
type Span struct {
	From, To, Horizon time.Duration
}

// SpanOf is the span of a run of jobs of mean duration mean.
func SpanOf(jobs []Job, mean time.Duration) Span {
	if len(jobs) == 0 {
		return Span{}
	}
	last := jobs[len(jobs)-1].Arrival
	return Span{From: min(mean, last/2), To: last, Horizon: last + mean}
}

// gibSeconds is the GiB-seconds a job of gib GiB held from start to end
// adds within the span's measuring window.
func (s Span) gibSeconds(gib int, start, end time.Duration) float64 {
	from, to := max(start, s.From), min(end, s.To)
	if to <= from {
		return 0
	}
	return float64(gib) * (to - from).Seconds()
}

// NodeLayout is the VF count of each card of a node (0: whole), cards in
// PCI address order.
type NodeLayout []int

// String is the layout in short: "2x1+2x2+4x4" (cards x VFs).
func (l NodeLayout) String() string {
	var s string
	for _, n := range []int{0, 2, 4} {
		c := 0
		for _, v := range l {
			if v == n {
				c++
			}
		}
		if c == 0 {
			continue
		}
		if s != "" {
			s += "+"
		}
		s += fmt.Sprintf("%dx%d", c, max(n, 1))
	}
	return s
}

// handles is what the layout takes of the driver's handle budget: every
// PF and every VF takes one.
func (l NodeLayout) handles() int {
	h := len(l)
	for _, n := range l {
		h += n
	}
	return h
}

// Uniform is the layout all=n of a node.
func Uniform(n int) NodeLayout {
	l := make(NodeLayout, CardsPerNode)
	for i := range l {
		l[i] = n
	}
	return l
}

// MaxQuarters is the layout with the most quarter cards the P800
// driver's handle budget allows (all=4 needs 40 handles of 32): six cards
// in 4 VFs, two whole.
func MaxQuarters() NodeLayout {
	budget := discover.HandleLimit(discover.GenerationKunlun3)
	l := Uniform(0)
	for i := range l {
		l[i] = 4
		if l.handles() > budget {
			l[i] = 0
			break
		}
	}
	return l
}

// StaticMixes are the node layouts of P800 cards (whole, 2 or 4 VFs each)
// within the driver's handle budget, whole cards first, then halves, then
// quarters: every mix once.
func StaticMixes() []NodeLayout {
	budget := discover.HandleLimit(discover.GenerationKunlun3)
	var out []NodeLayout
	for q := 0; q <= CardsPerNode; q++ {
		for h := 0; h+q <= CardsPerNode; h++ {
			l := make(NodeLayout, 0, CardsPerNode)
			for range CardsPerNode - h - q {
				l = append(l, 0)
			}
			for range h {
				l = append(l, 2)
			}
			for range q {
				l = append(l, 4)
			}
			if budget == 0 || l.handles() <= budget {
				out = append(out, l)
			}
		}
	}
	return out
}

// SimResult is the offline model's outcome of a trace on a static layout.
type SimResult struct {
	Layout      NodeLayout
	Utilisation float64
	Placed      int
	P99Wait     time.Duration
}

// Simulate runs jobs on nodes nodes of layout l without Kubernetes: at each
// arrival or end, the waiting jobs are tried in arrival order and each
// takes the smallest free slot that holds it (best fit, any node), until
// the span's horizon. A job's wait is from arrival to placement, or to the
// horizon for a job still waiting (a lower bound).
func Simulate(jobs []Job, nodes int, l NodeLayout, span Span) SimResult {
	horizon := span.Horizon
	// free[n] is the free slots of 1/n of a card (n = 1, 2, 4).
	free := map[int]int{}
	for _, v := range l {
		free[max(v, 1)] += max(v, 1) * nodes
	}
	type running struct {
		end  time.Duration
		slot int
	}
	var (
		run     []running
		queue   []Job
		waits   []time.Duration
		gibSecs float64
		placed  int
		next    int
	)
	for {
		now := horizon
		if next < len(jobs) && jobs[next].Arrival < now {
			now = jobs[next].Arrival
		}
		for _, r := range run {
			now = min(now, r.end)
		}
		if now >= horizon {
			break
		}
		kept := run[:0]
		for _, r := range run {
			if r.end <= now {
				free[r.slot]++
				continue
			}
			kept = append(kept, r)
		}
		run = kept
		for next < len(jobs) && jobs[next].Arrival <= now {
			queue = append(queue, jobs[next])
			next++
		}
		waiting := queue[:0]
		for _, j := range queue {
			slot := 0
			for _, n := range []int{4, 2, 1} {
				if n <= j.VFs && free[n] > 0 {
					slot = n
					break
				}
			}
			if slot == 0 {
				waiting = append(waiting, j)
				continue
			}
			free[slot]--
			end := now + j.Duration
			run = append(run, running{end: end, slot: slot})
			placed++
			waits = append(waits, now-j.Arrival)
			gibSecs += span.gibSeconds(j.GiB(), now, end)
		}
		queue = waiting
	}
	for _, j := range queue {
		waits = append(waits, horizon-j.Arrival)
	}
	return SimResult{Layout: l, Utilisation: utilisation(gibSecs, nodes*len(l), span.To-span.From), Placed: placed, P99Wait: benchstat.Quantile(waits, 0.99)}
}

// BestMix is the static mix of StaticMixes that serves jobs best in the
// offline model: the highest utilisation, then the lowest p99 wait, then
// the most whole cards (the first in StaticMixes' order).
func BestMix(jobs []Job, nodes int, span Span) SimResult {
	var best SimResult
	for i, l := range StaticMixes() {
		r := Simulate(jobs, nodes, l, span)
		if i == 0 || r.Utilisation > best.Utilisation+1e-9 ||
			(math.Abs(r.Utilisation-best.Utilisation) <= 1e-9 && r.P99Wait < best.P99Wait) {
			best = r
		}
	}
	return best
}
