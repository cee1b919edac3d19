package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// Spec generation targets: the time for 8 XPUs, and how it may grow with
// the count.
const (
	generateTarget8  = 15 * time.Millisecond
	generateMaxScale = 8.0
)

var (
	generateDevices   = []int{1, 8, 64, 256}
	generateLibraries = []int{10, 500}
)

type genConfig struct {
	devices, libraries int
	root               string
	times              samples
}

// benchGenerate times whole `xpu-cdi generate` processes on scaled fake
// hosts, all configurations in rotation.
func (b *bench) benchGenerate() []Row {
	const section = "1"
	var configs []*genConfig
	for _, l := range generateLibraries {
		for _, d := range generateDevices {
			root := filepath.Join(b.shm, "hosts", fmt.Sprintf("d%d-l%d", d, l))
			if _, err := fakehost.Build(root, fakehost.Scaled(d, l), fakehost.WithCacheDir(b.cache)); err != nil {
				return []Row{failRow(section, "building fake hosts", err)}
			}
			configs = append(configs, &genConfig{devices: d, libraries: l, root: root})
		}
	}
	hook := filepath.Join(b.bin, "xpu-runtime-hook")
	argv := func(c *genConfig) []string {
		return []string{filepath.Join(b.bin, "xpu-cdi"), "generate", "--dev-root", c.root, "--driver-root", c.root, "--hook-path", hook}
	}
	rounds := 2 * b.runs
	const warmup = 2
	for round := range rounds + warmup {
		// Rotate the start so no configuration always follows the same one.
		for i := range configs {
			c := configs[(i+round)%len(configs)]
			r, err := b.p.timed(cmdSpec{argv: argv(c)})
			if err != nil {
				return []Row{failRow(section, fmt.Sprintf("xpu-cdi generate, %d devices, %d libraries", c.devices, c.libraries), err)}
			}
			if round >= warmup {
				c.times = append(c.times, r.wall)
			}
		}
	}

	var rows []Row
	byKey := map[[2]int]*genConfig{}
	for _, c := range configs {
		byKey[[2]int{c.devices, c.libraries}] = c
		row := Row{
			Section: section,
			Name:    fmt.Sprintf("xpu-cdi generate, %d devices, %d library files (median of %d; p90)", c.devices, c.libraries, len(c.times)),
			Value:   fmt.Sprintf("%s (p90 %s)", ms(c.times.median()), ms(c.times.quantile(0.9))),
			Status:  Info,
		}
		if c.devices == 8 {
			row.Target = "< " + ms(generateTarget8)
			row.Status = check(c.times.median() < generateTarget8)
		}
		rows = append(rows, row)
	}
	for _, l := range generateLibraries {
		small, big := byKey[[2]int{8, l}], byKey[[2]int{256, l}]
		r := ratio(small.times, big.times)
		rows = append(rows, Row{
			Section: section,
			Name:    fmt.Sprintf("generate scaling 256 / 8 devices, %d library files", l),
			Value:   fmt.Sprintf("%.2fx", r),
			Target:  fmt.Sprintf("<= %.0fx", generateMaxScale),
			Status:  check(r <= generateMaxScale),
		})
	}
	return rows
}
