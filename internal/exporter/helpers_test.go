package exporter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// scrape collects c once and returns its series as `name{k="v",...}` (labels
// sorted) with their values.
func scrape(t testing.TB, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+`"`+l.GetValue()+`"`)
			}
			slices.Sort(labels)
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// named returns the series of s whose key starts with prefix and has every
// label of with.
func named(s map[string]float64, name string, with ...string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range s {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, w := range with {
			ok = ok && strings.Contains(k, w)
		}
		if ok {
			out[k] = v
		}
	}
	return out
}

// hostCollector builds h, writes state for its fake xpu-smi (when not nil)
// and returns a collector of cfg reading it.
func hostCollector(t testing.TB, h fakehost.Host, state func(*fakehost.Tree, *fakehost.XPUSMIState), cfg Config) (*Collector, *fakehost.Tree) {
	t.Helper()
	tr := fakehosttest.Build(t, h)
	if state != nil {
		s := fakehost.DefaultTelemetry(tr)
		state(tr, &s)
		require.NoError(t, fakehost.WriteXPUSMIState(tr.Root, s))
	}
	disc := func() (*discover.Host, error) {
		return discover.Discover(tr.DiscoverOptions()...)
	}
	cfg.Discover, cfg.DevRoot = disc, tr.Root
	return New(cfg), tr
}

// value returns the value of the series key of s, which must be there.
func value(t testing.TB, s map[string]float64, key string) float64 {
	t.Helper()
	v, ok := s[key]
	if !ok {
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		t.Fatalf("no series %s among:\n%s", key, strings.Join(keys, "\n"))
	}
	return v
}

// countingXPUSMI writes a program that logs each run's arguments, one line
// per run, and then runs the fake xpu-smi of tr; it returns its path and
// the runs so far.
func countingXPUSMI(t testing.TB, tr *fakehost.Tree) (string, func() []string) {
	t.Helper()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	prog := filepath.Join(dir, "xpu-smi")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %s\nexec %s \"$@\"\n", runs, tr.Path(fakehost.XPUSMILink))
	require.NoError(t, os.WriteFile(prog, []byte(script), 0o755))
	return prog, func() []string {
		b, err := os.ReadFile(runs)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		require.NoError(t, err)
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
}

// countOf returns how many of runs have exactly the arguments args.
func countOf(runs []string, args string) int {
	n := 0
	for _, r := range runs {
		if r == args {
			n++
		}
	}
	return n
}
