package scale

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Environment of TestScale (make bench-scale NODES=... PODS=... CASES=...
// OUT=...).
const (
	// EnvNodes is a comma-separated list of node counts; each gets a
	// cluster of its own.
	EnvNodes = "XPU_SCALE_NODES"
	// EnvPods is the number of pods each case creates.
	EnvPods = "XPU_SCALE_PODS"
	// EnvCases is a comma-separated list of case letters (a-f).
	EnvCases = "XPU_SCALE_CASES"
	// EnvOut is the directory of scale-results.md and scale-results.json;
	// empty means a temporary directory of the test.
	EnvOut = "XPU_SCALE_OUT"
)

// Defaults: the small run of CI.
const (
	DefaultNodes = "50"
	DefaultPods  = 200
	DefaultCases = "a,b"
)

// Config is one invocation of the benchmark.
type Config struct {
	Nodes []int
	Pods  int
	Cases []string
	Out   string
}

// ConfigFromEnv reads Config from the environment (getenv is os.Getenv
// outside tests), with the CI defaults for what is not set.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	nodes := getenv(EnvNodes)
	if nodes == "" {
		nodes = DefaultNodes
	}
	for _, f := range strings.Split(nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return c, fmt.Errorf("%s=%q: want a comma-separated list of positive node counts, e.g. 100,300,1000", EnvNodes, nodes)
		}
		c.Nodes = append(c.Nodes, n)
	}
	c.Pods = DefaultPods
	if p := getenv(EnvPods); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return c, fmt.Errorf("%s=%q: want a positive number of pods", EnvPods, p)
		}
		c.Pods = n
	}
	cases := getenv(EnvCases)
	if cases == "" {
		cases = DefaultCases
	}
	for _, f := range strings.Split(cases, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if _, ok := caseByLetter(f); !ok {
			return c, fmt.Errorf("%s=%q: unknown case %q; the cases are %s", EnvCases, cases, f, strings.Join(Letters(), ","))
		}
		if !slices.Contains(c.Cases, f) {
			c.Cases = append(c.Cases, f)
		}
	}
	// Letter order: (a) runs first, before the DeviceClasses exist, and
	// every DRA case is compared with it.
	slices.Sort(c.Cases)
	c.Out = getenv(EnvOut)
	for _, n := range c.Nodes {
		for _, l := range c.Cases {
			cs, _ := caseByLetter(l)
			if most := cs.fits(n); c.Pods > most {
				return c, fmt.Errorf("%s=%d: case %s fits at most %d pods on %d nodes (%d devices per node, %d per pod)", EnvPods, c.Pods, l, most, n, cs.devicesPerNode(), cs.DevicesPerPod)
			}
		}
	}
	return c, nil
}
