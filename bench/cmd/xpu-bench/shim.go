package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Shim targets: the time the shim adds to a create, and its memory.
const (
	shimMaxAdded = 1500 * time.Microsecond
	shimMaxRSS   = 20 << 20
)

// shimMode is one way a container goes through the shim.
type shimMode struct {
	name    string
	mode    string // config mode
	request bool   // the container asks for an XPU
}

var shimModes = []shimMode{
	{name: "no XPU asked (pass-through)", mode: "cdi"},
	{name: "cdi mode, 1 XPU", mode: "cdi", request: true},
	{name: "jit mode, 1 XPU", mode: "jit", request: true},
}

// shimSetup is what a shim comparison needs for one mode.
type shimSetup struct {
	shimMode
	env      []string // environment of the shim (its config file)
	runcCfg  []byte   // config.json runc alone gets: the shim's output
	shimCfg  []byte   // config.json the shim gets
	maxRSS   int64    // the shim's peak RSS (low-level runtime /bin/true)
	noopEnv  []string // environment of the shim with xpu-bench-noop as its runtime
	ownA     samples  // xpu-bench-noop alone
	ownB     samples  // the shim, then xpu-bench-noop
	createA  samples  // runc
	createB  samples  // shim
	deleteA  samples
	deleteB  samples
	checkedB bool
}

// shimConfig writes a shim configuration file and returns its path.
func (b *bench) shimConfig(fx *fixtures, name, mode, runtime string) (string, error) {
	path := filepath.Join(b.shm, "shim", name+".toml")
	cfg := fmt.Sprintf(`low-level-runtimes = [%q]
mode = %q
spec-dirs = [%q]
vendor = %q
class = "xpu"
dev-root = %q
driver-root = %q
hook-path = %q
cache-dir = %q
`, runtime, mode, fx.specDir, b.vendor, fx.host, fx.host, filepath.Join(b.bin, "xpu-runtime-hook"), filepath.Join(b.shm, "shim", "cache"))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

func shimEnv(cfg string) []string {
	return append(os.Environ(), "XPU_CONTAINER_TOOLKIT_CONFIG="+cfg)
}

// prepareShim builds the configs of every mode: the shim is run once per
// mode with /bin/true as its low-level runtime, which gives the config.json
// it hands to runc (what runc alone is then compared on, so both sides start
// the same container and only the shim's own work differs) and its peak RSS.
func (b *bench) prepareShim(fx *fixtures) ([]*shimSetup, error) {
	if b.setups != nil {
		return b.setups, nil
	}
	plain, err := b.bundleConfig(fx.rootfs, false)
	if err != nil {
		return nil, err
	}
	asking, err := b.bundleConfig(fx.rootfs, true)
	if err != nil {
		return nil, err
	}
	trueBin, err := lookPath("true")
	if err != nil {
		return nil, err
	}
	scratch := filepath.Join(b.shm, "shim", "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", scratch, err)
	}
	var out []*shimSetup
	for i, m := range shimModes {
		s := &shimSetup{shimMode: m, shimCfg: plain}
		if m.request {
			s.shimCfg = asking
		}
		measureCfg, err := b.shimConfig(fx, fmt.Sprintf("mode%d-true", i), m.mode, trueBin)
		if err != nil {
			return nil, err
		}
		for range 5 {
			if err := os.WriteFile(filepath.Join(scratch, "config.json"), s.shimCfg, 0o644); err != nil {
				return nil, fmt.Errorf("writing the scratch bundle: %w", err)
			}
			rss, err := b.p.peakRSS(cmdSpec{argv: []string{b.shim, "--root", filepath.Join(b.shm, "shim", "unused"), "create", "--bundle", scratch, "xpu-bench-rss"}, env: shimEnv(measureCfg)})
			if err != nil {
				return nil, fmt.Errorf("shim %s with /bin/true as runtime: %w", m.name, err)
			}
			s.maxRSS = max(s.maxRSS, rss)
		}
		cfg, err := os.ReadFile(filepath.Join(scratch, "config.json"))
		if err != nil {
			return nil, fmt.Errorf("reading the shim's output: %w", err)
		}
		if injected(cfg) != m.request {
			return nil, fmt.Errorf("shim %s: config.json has /dev/xpu0: %v, want %v", m.name, injected(cfg), m.request)
		}
		s.runcCfg = cfg
		runCfg, err := b.shimConfig(fx, fmt.Sprintf("mode%d", i), m.mode, b.runc)
		if err != nil {
			return nil, err
		}
		s.env = shimEnv(runCfg)
		noopCfg, err := b.shimConfig(fx, fmt.Sprintf("mode%d-noop", i), m.mode, b.noop())
		if err != nil {
			return nil, err
		}
		s.noopEnv = shimEnv(noopCfg)
		out = append(out, s)
	}
	b.setups = out
	return out, nil
}

// benchShim compares create+delete pairs through the shim with runc alone,
// interleaved (A B, then B A, ...), for every mode.
func (b *bench) benchShim() []Row {
	const section = "2"
	if b.shim == "" {
		return []Row{{Section: section, Name: "xpu-container-runtime create overhead and peak RSS", Value: b.shimWhy, Status: Skip}}
	}
	fx, err := b.fixtures()
	if err != nil {
		return []Row{failRow(section, "fixtures", err)}
	}
	setups, err := b.prepareShim(fx)
	if err != nil {
		return []Row{failRow(section, "preparing the shim", err)}
	}
	root := filepath.Join(b.shm, "shim", "runc-root")
	bundle := filepath.Join(b.shm, "shim", "bundle")
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		return []Row{failRow(section, "bundle", err)}
	}
	b.cleanups.add(func() { b.runcCleanup(root) })

	const warmup = 2
	n := b.runs + warmup
	for i := range n {
		for _, s := range setups {
			sides := []bool{false, true}
			if i%2 == 1 {
				sides = []bool{true, false}
			}
			for _, viaShim := range sides {
				id := fmt.Sprintf("xpu-bench-%d-%d-%t", i, len(s.createA)+len(s.createB), viaShim)
				create, del, err := b.createDelete(s, root, bundle, id, viaShim)
				if err != nil {
					return []Row{failRow(section, "create/delete "+s.name, err)}
				}
				if i < warmup {
					continue
				}
				if viaShim {
					s.createB, s.deleteB = append(s.createB, create), append(s.deleteB, del)
				} else {
					s.createA, s.deleteA = append(s.createA, create), append(s.deleteA, del)
				}
			}
		}
	}

	floor, err := b.shimOwnCost(setups, bundle)
	if err != nil {
		return []Row{failRow(section, "shim's own cost", err)}
	}

	var rows []Row
	if f := floor; f != nil {
		own := pairedDiff(f.ownA, f.ownB)
		rows = append(rows, Row{
			Section: section,
			Name:    fmt.Sprintf("floor: a static Go program that only execs the same empty program (median of %d pairs; IQR)", len(f.ownA)),
			Value: fmt.Sprintf("%+.2f ms, IQR %+.2f..%+.2f ms (what any Go shim adds on this machine)",
				msf(own.median()), msf(own.quantile(0.25)), msf(own.quantile(0.75))),
			Target: "-",
			Status: Info,
		})
	}
	var maxRSS int64
	for _, s := range setups {
		d := pairedDiff(s.createA, s.createB)
		rows = append(rows, Row{
			Section: section,
			Name:    fmt.Sprintf("shim create, %s, with runc: added per create (median of %d pairs; IQR of the differences)", s.name, len(s.createA)),
			Value: fmt.Sprintf("%+.2f ms, IQR %+.1f..%+.1f ms (runc %s, shim %s, x%.3f; delete %+.2f ms)",
				msf(d.median()), msf(d.quantile(0.25)), msf(d.quantile(0.75)), ms(s.createA.median()), ms(s.createB.median()),
				ratio(s.createA, s.createB), msf(pairedDiff(s.deleteA, s.deleteB).median())),
			Target: "(see the next row)",
			Status: Info,
		})
		own := pairedDiff(s.ownA, s.ownB)
		rows = append(rows, Row{
			Section: section,
			Name:    fmt.Sprintf("shim create, %s: its own cost per create, runtime an empty Go program (median of %d pairs; IQR)", s.name, len(s.ownA)),
			Value: fmt.Sprintf("%+.2f ms, IQR %+.2f..%+.2f ms (program alone %s, through the shim %s)",
				msf(own.median()), msf(own.quantile(0.25)), msf(own.quantile(0.75)), ms(s.ownA.median()), ms(s.ownB.median())),
			Target: "<= 1.5 ms added",
			Status: check(own.median() <= shimMaxAdded),
		})
		maxRSS = max(maxRSS, s.maxRSS)
	}
	rows = append(rows, Row{
		Section: section,
		Name:    "shim peak RSS (GNU time, low-level runtime /bin/true, worst mode of 5 runs each)",
		Value:   fmt.Sprintf("%.1f MiB", float64(maxRSS)/(1<<20)),
		Target:  "< 20 MiB",
		Status:  check(maxRSS < shimMaxRSS),
	})
	return rows
}

// shimOwnCost times `create` through the shim with xpu-bench-noop (an
// empty static Go program) as its low-level runtime against xpu-bench-noop
// run alone, interleaved, many times: what the shim adds to a create
// without the ±10 ms that runc's own create varies by on this machine.
// config.json is rewritten before each run (not timed).
func (b *bench) shimOwnCost(setups []*shimSetup, bundle string) (*shimSetup, error) {
	noop := b.noop()
	if !fileExists(noop) {
		return nil, fmt.Errorf("%s is missing", noop)
	}
	const warmup = 5
	n := 8*b.runs + warmup
	exe := filepath.Join(b.bin, "xpu-bench-exec")
	var floor *shimSetup
	if fileExists(exe) {
		floor = &shimSetup{shimMode: shimMode{name: "floor"}}
	}
	for i := range n {
		if floor != nil {
			for _, wrapped := range []bool{i%2 == 0, i%2 == 1} {
				c := cmdSpec{argv: []string{noop, "create", "xpu-bench-floor"}}
				if wrapped {
					c.argv = append([]string{exe}, c.argv...)
				}
				r, err := b.p.timed(c)
				if err != nil {
					return nil, err
				}
				switch {
				case i < warmup:
				case wrapped:
					floor.ownB = append(floor.ownB, r.wall)
				default:
					floor.ownA = append(floor.ownA, r.wall)
				}
			}
		}
		for _, s := range setups {
			sides := []bool{false, true}
			if i%2 == 1 {
				sides = []bool{true, false}
			}
			for _, viaShim := range sides {
				if err := os.WriteFile(filepath.Join(bundle, "config.json"), s.shimCfg, 0o644); err != nil {
					return nil, fmt.Errorf("writing config.json: %w", err)
				}
				c := cmdSpec{argv: []string{noop, "--root", "/nonexistent", "create", "--bundle", bundle, "xpu-bench-own"}}
				if viaShim {
					c.argv[0], c.env = b.shim, s.noopEnv
				}
				r, err := b.p.timed(c)
				if err != nil {
					return nil, err
				}
				if i < warmup {
					continue
				}
				if viaShim {
					s.ownB = append(s.ownB, r.wall)
				} else {
					s.ownA = append(s.ownA, r.wall)
				}
			}
		}
	}
	return floor, nil
}

func (b *bench) noop() string { return filepath.Join(b.bin, "xpu-bench-noop") }

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// createDelete creates and deletes one container through runc or the shim
// and returns both wall times. config.json is rewritten before the create
// (not timed): the shim replaces it.
func (b *bench) createDelete(s *shimSetup, root, bundle, id string, viaShim bool) (time.Duration, time.Duration, error) {
	cfg, bin, env := s.runcCfg, b.runc, []string(nil)
	if viaShim {
		cfg, bin, env = s.shimCfg, b.shim, s.env
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o644); err != nil {
		return 0, 0, fmt.Errorf("writing config.json: %w", err)
	}
	c, err := b.p.timed(cmdSpec{argv: []string{bin, "--root", root, "create", "--bundle", bundle, id}, env: env})
	if err != nil {
		return 0, 0, err
	}
	if viaShim && !s.checkedB {
		got, err := os.ReadFile(filepath.Join(bundle, "config.json"))
		if err != nil {
			return 0, 0, fmt.Errorf("reading config.json: %w", err)
		}
		if injected(got) != s.request {
			return 0, 0, fmt.Errorf("after the shim's create, config.json has /dev/xpu0: %v, want %v", injected(got), s.request)
		}
		s.checkedB = true
	}
	d, err := b.p.timed(cmdSpec{argv: []string{bin, "--root", root, "delete", id}, env: env})
	if err != nil {
		return 0, 0, err
	}
	return c.wall, d.wall, nil
}

// runcCleanup force-deletes every container left in a runc root.
func (b *bench) runcCleanup(root string) {
	if _, err := os.Stat(root); err != nil {
		return
	}
	out, err := output(nil, b.runc, "--root", root, "list", "-q")
	if err != nil {
		b.log("listing containers in %s: %v", root, err)
	}
	for _, id := range splitLines(out) {
		if _, err := output(nil, b.runc, "--root", root, "delete", "--force", id); err != nil {
			b.log("deleting container %s: %v", id, err)
		}
	}
}

func splitLines(s string) []string { return strings.Fields(s) }
