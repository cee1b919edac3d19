package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// concurrentContainers is the size of a burst of creates
// (docs/benchmarks.md).
const concurrentContainers = 100

// benchConcurrent creates 100 containers at once through the shim (cdi
// mode, each asking for one XPU) and through runc alone (on the config.json
// the shim would produce), in alternating rounds, and reports the create
// latencies.
func (b *bench) benchConcurrent() []Row {
	const section = "5"
	if b.shim == "" {
		return []Row{{Section: section, Name: fmt.Sprintf("%d concurrent creates through the shim vs runc", concurrentContainers), Value: b.shimWhy, Status: Skip}}
	}
	fx, err := b.fixtures()
	if err != nil {
		return []Row{failRow(section, "fixtures", err)}
	}
	setups, err := b.prepareShim(fx)
	if err != nil {
		return []Row{failRow(section, "preparing the shim", err)}
	}
	var s *shimSetup
	for _, x := range setups {
		if x.mode == "cdi" && x.request {
			s = x
		}
	}
	root := filepath.Join(b.shm, "concurrent", "runc-root")
	b.cleanups.add(func() { b.runcCleanup(root) })
	bundles := make([]string, concurrentContainers)
	for i := range bundles {
		bundles[i] = filepath.Join(b.shm, "concurrent", fmt.Sprintf("bundle%03d", i))
		if err := os.MkdirAll(bundles[i], 0o755); err != nil {
			return []Row{failRow(section, "bundles", err)}
		}
	}

	var a, bb samples
	var walls [2]samples
	rounds := []bool{false, true, true, false}
	for round, viaShim := range rounds {
		lat, wall, err := b.burst(s, root, bundles, round, viaShim)
		if err != nil {
			return []Row{failRow(section, "burst", err)}
		}
		if viaShim {
			bb = append(bb, lat...)
			walls[1] = append(walls[1], wall)
		} else {
			a = append(a, lat...)
			walls[0] = append(walls[0], wall)
		}
	}
	return []Row{
		{
			Section: section,
			Name:    fmt.Sprintf("%d concurrent creates, runc alone: p50 / p99 create latency (%d creates)", concurrentContainers, len(a)),
			Value:   fmt.Sprintf("%s / %s (burst done in %s)", ms(a.median()), ms(a.quantile(0.99)), ms(walls[0].median())),
			Status:  Info,
		},
		{
			Section: section,
			Name:    fmt.Sprintf("%d concurrent creates through the shim, cdi mode, 1 XPU each: p50 / p99 (%d creates)", concurrentContainers, len(bb)),
			Value: fmt.Sprintf("%s / %s (x%.3f / x%.3f of runc; burst done in %s)", ms(bb.median()), ms(bb.quantile(0.99)),
				float64(bb.median())/float64(a.median()), float64(bb.quantile(0.99))/float64(a.quantile(0.99)), ms(walls[1].median())),
			Status: Info,
		},
	}
}

// burst creates one container per bundle, all at once, returns each create's
// latency and the burst's wall time, then deletes them (not timed).
func (b *bench) burst(s *shimSetup, root string, bundles []string, round int, viaShim bool) (samples, time.Duration, error) {
	cfg, bin, env := s.runcCfg, b.runc, []string(nil)
	if viaShim {
		cfg, bin, env = s.shimCfg, b.shim, s.env
	}
	ids := make([]string, len(bundles))
	for i, bundle := range bundles {
		if err := os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o644); err != nil {
			return nil, 0, fmt.Errorf("writing config.json: %w", err)
		}
		ids[i] = fmt.Sprintf("xpu-burst-%d-%03d", round, i)
	}
	lat := make(samples, len(bundles))
	errs := make([]error, len(bundles))
	procs := make([]*proc, len(bundles))
	for i := range procs {
		p, err := newProc(b.shm)
		if err != nil {
			return nil, 0, err
		}
		defer p.close()
		procs[i] = p
	}
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	for i := range bundles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			r, err := procs[i].timed(cmdSpec{argv: []string{bin, "--root", root, "create", "--bundle", bundles[i], ids[i]}, env: env})
			lat[i], errs[i] = r.wall, err
		}()
	}
	start := time.Now()
	close(startGate)
	wg.Wait()
	wall := time.Since(start)

	// Delete with a few workers; failures here are cleanup problems.
	var failed error
	var mu sync.Mutex
	work := make(chan int)
	var dg sync.WaitGroup
	for w := range 4 {
		dg.Add(1)
		go func() {
			defer dg.Done()
			for i := range work {
				if errs[i] != nil {
					continue
				}
				if _, err := procs[w].timed(cmdSpec{argv: []string{b.runc, "--root", root, "delete", "--force", ids[i]}}); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		}()
	}
	for i := range bundles {
		work <- i
	}
	close(work)
	dg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return lat, wall, failed
}
