package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
)

// podmanMaxRatio is the end-to-end target: a podman run with an XPU
// under 5% slower than without.
const podmanMaxRatio = 1.05

// podman is a Podman with its own configuration and storage under dir:
// runc, cgroupfs, no network, file events and 1024 nofile/nproc (what works
// on cgroup v1 hybrid hosts without CAP_SYS_RESOURCE), as in tests/e2e.
type podman struct {
	bin  string
	dir  string
	env  []string
	args []string
}

func (b *bench) newPodman() (*podman, error) {
	bin, err := lookPath("podman")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.disk, "podman")
	conf, err := testenv.WritePodmanConfig(dir, b.runc)
	if err != nil {
		return nil, err
	}
	p := &podman{
		bin:  bin,
		dir:  dir,
		args: conf.Args(),
		env:  append(conf.Env(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
	}
	b.cleanups.add(p.cleanup)
	return p, nil
}

func (p *podman) argv(args ...string) []string {
	return append(append([]string{p.bin}, p.args...), args...)
}

func (p *podman) run(args ...string) (string, error) { return output(p.env, p.argv(args...)...) }

func (p *podman) cleanup() {
	for _, args := range [][]string{
		{"rm", "--all", "--force", "--time", "0"},
		{"image", "rm", "--all", "--force"},
		{"system", "reset", "--force"},
	} {
		if _, err := p.run(args...); err != nil {
			fmt.Fprintf(os.Stderr, "xpu-bench: podman cleanup: %v\n", err)
		}
	}
	unmountBelow(p.dir)
}

// benchPodman compares `podman run --rm IMAGE true` with and without
// `--device VENDOR/xpu=0` (the generated spec installed in /var/run/cdi
// under a unique test vendor, removed at the end), interleaved.
func (b *bench) benchPodman() []Row {
	const section = "4"
	fx, err := b.fixtures()
	if err != nil {
		return []Row{failRow(section, "fixtures", err)}
	}
	p, err := b.newPodman()
	if err != nil {
		return []Row{failRow(section, "podman", err)}
	}
	tarPath := filepath.Join(b.disk, "image.tar")
	imageRoot := filepath.Join(b.disk, "image-rootfs")
	if _, err := buildGlibcRootfs(imageRoot); err != nil {
		return []Row{failRow(section, "image", err)}
	}
	if err := testenv.Tar(imageRoot, tarPath); err != nil {
		return []Row{failRow(section, "image", err)}
	}
	const image = "localhost/xpu-bench-glibc:latest"
	if _, err := p.run("import", "--change", "CMD=/bin/sh", tarPath, image); err != nil {
		return []Row{failRow(section, "podman import", err)}
	}

	// The specs go where Podman 4.3 reads them; the vendors are unique to
	// this run and end in .xpu-cdi.test, so no real spec is ever touched.
	// The variants tell which part of the injection costs what.
	// "host devices" passes the same two nodes without CDI (podman run
	// --device PATH): what Podman itself costs for a device.
	type variant struct {
		name   string
		vendor string
		extra  []string
		run    cmdSpec
		times  samples
		// spec is where the variant's spec is read, staged where it waits.
		spec, staged string
	}
	variants := []*variant{
		{name: "plain"},
		{name: "full", vendor: b.vendor},
		{name: "no hooks", extra: []string{"--no-hooks"}},
		{name: "nodes only", extra: []string{"--nodes-only"}},
		{name: "host devices"},
	}
	const cdiDir = "/var/run/cdi"
	// Next to the spec directory, so that a rename moves a spec.
	staging, err := os.MkdirTemp(filepath.Dir(cdiDir), "xpu-bench-specs-")
	if err != nil {
		return []Row{failRow(section, "CDI spec", err)}
	}
	b.cleanups.add(func() { removeAll(staging) })
	for _, v := range variants {
		switch v.name {
		case "plain":
			v.run = cmdSpec{argv: p.argv("run", "--rm", image, "true"), env: p.env}
			continue
		case "host devices":
			v.run = cmdSpec{argv: p.argv("run", "--rm",
				"--device", filepath.Join(fx.host, "dev", "xpu0")+":/dev/xpu0",
				"--device", filepath.Join(fx.host, "dev", "xpuctrl")+":/dev/xpuctrl", image, "true"), env: p.env}
			continue
		}
		if v.vendor == "" {
			if v.vendor, err = uniqueVendor(); err != nil {
				return []Row{failRow(section, "CDI spec", err)}
			}
		}
		v.spec = filepath.Join(cdiDir, v.vendor+"-xpu.yaml")
		v.staged = filepath.Join(staging, v.vendor+"-xpu.yaml")
		if _, err := os.Lstat(v.spec); err == nil {
			return []Row{failRow(section, "CDI spec", fmt.Errorf("%s already exists", v.spec))}
		}
		b.cleanups.add(func() {
			for _, p := range []string{v.spec, v.staged} {
				if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
					b.log("removing %s: %v", p, err)
				}
			}
		})
		if err := b.generateVendorSpec(v.vendor, fx.host, v.staged, v.extra...); err != nil {
			return []Row{failRow(section, "CDI spec", err)}
		}
		v.run = cmdSpec{argv: p.argv("run", "--rm", "--device", v.vendor+"/xpu=0", image, "true"), env: p.env}
	}
	// A host has one XPU spec, and Podman 4.3 parses every spec file in the
	// spec directories at every run (about 6 ms per 10 KB here): only the
	// spec of the variant being timed is in /var/run/cdi (moved in and out
	// between runs, untimed).
	install := func(cur *variant) error {
		for _, v := range variants {
			if v.spec == "" {
				continue
			}
			from, to := v.spec, v.staged
			if v == cur {
				from, to = v.staged, v.spec
			}
			if err := os.Rename(from, to); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("moving %s: %w", from, err)
			}
		}
		return nil
	}
	if err := install(variants[1]); err != nil {
		return []Row{failRow(section, "CDI spec", err)}
	}
	device := b.vendor + "/xpu=0"
	// The container must really get the device: check once.
	out, err := p.run("run", "--rm", "--device", device, image, "sh", "-c", "test -c /dev/xpu0 && test -c /dev/xpuctrl && ls /usr/local/xpu/lib64")
	if err != nil || !strings.Contains(out, "libxpurt.so.1") {
		return []Row{failRow(section, "podman run --device "+device, fmt.Errorf("the container did not get the XPU: %w: %s", err, out))}
	}

	const warmup = 2
	// A podman run varies by tens of ms here (the IQR of the paired
	// differences is about +-10 ms, 5% of a run): twice as many runs.
	n := max(2*b.runs, 6) + warmup
	for i := range n {
		// In order, then in reverse order, ...
		for j := range variants {
			k := j
			if i%2 == 1 {
				k = len(variants) - 1 - j
			}
			v := variants[k]
			if err := install(v); err != nil {
				return []Row{failRow(section, "CDI spec", err)}
			}
			r, err := b.p.timed(v.run)
			if err != nil {
				return []Row{failRow(section, "podman run", err)}
			}
			if i >= warmup {
				v.times = append(v.times, r.wall)
			}
		}
	}
	plain := variants[0].times
	var rows []Row
	for _, v := range variants[1:] {
		rt := ratio(plain, v.times)
		d := pairedDiff(plain, v.times)
		row := Row{
			Section: section,
			Value: fmt.Sprintf("x%.3f (%+.1f%%; plain %s, with XPU %s, paired diff %+.1f ms, IQR %+.0f..%+.0f ms)", rt, (rt-1)*100,
				ms(plain.median()), ms(v.times.median()), msf(d.median()), msf(d.quantile(0.25)), msf(d.quantile(0.75))),
			Status: Info,
		}
		switch v.name {
		case "full":
			row.Name = fmt.Sprintf("podman run --rm --device <vendor>/xpu=0 IMAGE true vs without (median of %d runs each)", len(plain))
			row.Target = "< 5% slower"
			row.Status = check(rt < podmanMaxRatio)
		case "host devices":
			row.Name = "same, no CDI: the two nodes as --device PATH (what Podman itself costs for them)"
		default:
			row.Name = "same, spec generated with --" + strings.ReplaceAll(v.name, " ", "-") + " (which part costs what)"
		}
		rows = append(rows, row)
	}
	return rows
}
