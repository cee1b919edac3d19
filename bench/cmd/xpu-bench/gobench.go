package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// goBench is one Go benchmark, over every -count repetition.
type goBench struct {
	pkg, name string
	nsPerOp   []float64
	bytes     float64
	allocs    float64
	// custom holds the metrics a benchmark reports itself in ms
	// (b.ReportMetric(v, "median-ms")): the last repetition's.
	custom map[string]float64
}

var (
	benchLine  = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([0-9.]+) ns/op(.*)$`)
	bytesField = regexp.MustCompile(`([0-9.]+) B/op`)
	allocField = regexp.MustCompile(`([0-9.]+) allocs/op`)
	msField    = regexp.MustCompile(`([0-9.]+) ([a-z0-9]+)-ms\b`)
)

// prepareTarget is the target for the DRA driver's Prepare of a
// claim of 8 XPUs: a median under 5 ms.
const (
	prepareBench  = "internal/dra BenchmarkPrepare/xpus=8"
	prepareTarget = 5.0
)

// parseGoBench reads `go test -bench -benchmem` output, keeping the order
// in which benchmarks first appear.
func parseGoBench(r io.Reader) ([]*goBench, error) {
	var (
		out  []*goBench
		byID = map[string]*goBench{}
		pkg  string
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ns, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("parsing %q: %w", line, err)
		}
		id := pkg + " " + m[1]
		g := byID[id]
		if g == nil {
			g = &goBench{pkg: pkg, name: m[1]}
			byID[id] = g
			out = append(out, g)
		}
		g.nsPerOp = append(g.nsPerOp, ns)
		if f := bytesField.FindStringSubmatch(m[3]); f != nil {
			g.bytes, _ = strconv.ParseFloat(f[1], 64)
		}
		if f := allocField.FindStringSubmatch(m[3]); f != nil {
			g.allocs, _ = strconv.ParseFloat(f[1], 64)
		}
		for _, f := range msField.FindAllStringSubmatch(m[3], -1) {
			if g.custom == nil {
				g.custom = map[string]float64{}
			}
			g.custom[f[2]], _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading benchmark output: %w", err)
	}
	return out, nil
}

func (g *goBench) median() time.Duration {
	v := slices.Clone(g.nsPerOp)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return time.Duration(v[n/2])
	}
	return time.Duration((v[n/2-1] + v[n/2]) / 2)
}

// modulePath is cut from the package names of the rows.
const modulePath = "github.com/xpu-cdi/xpu-cdi"

func (g *goBench) row() Row {
	pkg := strings.TrimPrefix(g.pkg, modulePath+"/")
	r := Row{
		Section: "1b",
		Name:    fmt.Sprintf("go test -bench %s %s", pkg, strings.TrimPrefix(g.name, "Benchmark")),
		Value:   fmt.Sprintf("%s/op, %s/op, %.0f allocs/op", ms(g.median()), kib(g.bytes), g.allocs),
		Status:  Info,
	}
	for _, k := range []string{"median", "p99"} {
		if v, ok := g.custom[k]; ok {
			r.Value += fmt.Sprintf(", %s %.2f ms", k, v)
		}
	}
	if median, ok := g.custom["median"]; ok && pkg+" "+g.name == prepareBench {
		r.Target = fmt.Sprintf("median < %.0f ms", prepareTarget)
		r.Status = Pass
		if median >= prepareTarget {
			r.Status = Fail
		}
	}
	return r
}

func kib(bytes float64) string {
	if bytes >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", bytes/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", bytes/1024)
}

// benchGo summarizes the Go benchmarks hack/bench.sh ran.
func (b *bench) benchGo() []Row {
	if b.gobench == "" {
		return []Row{{Section: "1b", Name: "Go benchmarks", Value: "not run (no --gobench file)", Status: Skip}}
	}
	f, err := os.Open(b.gobench)
	if err != nil {
		return []Row{failRow("1b", "Go benchmarks", err)}
	}
	defer func() { _ = f.Close() }()
	benches, err := parseGoBench(f)
	if err != nil {
		return []Row{failRow("1b", "Go benchmarks", err)}
	}
	if len(benches) == 0 {
		return []Row{failRow("1b", "Go benchmarks", fmt.Errorf("no benchmark result in %s", b.gobench))}
	}
	var rows []Row
	for _, g := range benches {
		rows = append(rows, g.row())
	}
	if r, ok := podStartRow(benches); ok {
		rows = append(rows, r)
	}
	return rows
}

// The target for pod start: the DRA path no slower than the device
// plugin path. Both are medians of a few pod starts on a shared machine, so
// "no slower" allows 10% of noise.
const (
	podStartDRA    = "tests/e2e BenchmarkPodStart/dra"
	podStartPlugin = "tests/e2e BenchmarkPodStart/device-plugin"
	podStartNoise  = 1.10
)

// podStartRow compares the medians of the two pod start benchmarks.
func podStartRow(benches []*goBench) (Row, bool) {
	find := func(id string) (float64, bool) {
		for _, g := range benches {
			if strings.TrimPrefix(g.pkg, modulePath+"/")+" "+g.name == id {
				v, ok := g.custom["median"]
				return v, ok
			}
		}
		return 0, false
	}
	dra, ok1 := find(podStartDRA)
	plugin, ok2 := find(podStartPlugin)
	if !ok1 || !ok2 || plugin <= 0 {
		return Row{}, false
	}
	r := Row{
		Section: "1b",
		Name:    "pod start with one XPU: DRA driver / device plugin (medians)",
		Value:   fmt.Sprintf("%.0f ms / %.0f ms (x%.2f)", dra, plugin, dra/plugin),
		Target:  fmt.Sprintf("DRA <= device plugin (x%.2f for noise)", podStartNoise),
		Status:  Pass,
	}
	if dra > plugin*podStartNoise {
		r.Status = Fail
	}
	return r, true
}
