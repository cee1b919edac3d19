package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tags.cncf.io/container-device-interface/specs-go"
)

// hookMax is the per-container target of each hook.
const hookMax = 5 * time.Millisecond

// hookCase is one hook invocation measured on one image root.
type hookCase struct {
	name   string
	target bool // has the 5 ms target (the others are for explanation)
	argv   []string
	env    []string
	stdin  *os.File
	reset  func() error // before every run, not timed
	times  samples
}

// hookRoot is an image root with the driver files the spec mounts copied
// in, and a bundle and container state naming it.
type hookRoot struct {
	rootfs  string
	ldCache []byte
	state   *os.File
}

func (b *bench) hookRoot(fx *fixtures, rootfs string, cache []byte, name string) (*hookRoot, error) {
	for _, m := range fx.spec.ContainerEdits.Mounts {
		// runc left empty mount points there if the shim section ran
		// containers on this root before.
		dst := filepath.Join(rootfs, filepath.Clean("/"+m.ContainerPath))
		if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing %s: %w", dst, err)
		}
		if err := copyFile(m.HostPath, dst); err != nil {
			return nil, err
		}
	}
	bundle := filepath.Join(b.shm, "hooks", name)
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", bundle, err)
	}
	cfg, err := b.bundleConfig(rootfs, false)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o644); err != nil {
		return nil, fmt.Errorf("writing %s/config.json: %w", bundle, err)
	}
	state, err := json.Marshal(map[string]any{
		"ociVersion": "1.0.2", "id": "xpu-bench-" + name, "status": "creating",
		"pid": os.Getpid(), "bundle": bundle,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the container state: %w", err)
	}
	f, err := os.Create(filepath.Join(bundle, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("creating the state file: %w", err)
	}
	b.cleanups.add(func() { _ = f.Close() })
	if _, err := f.Write(state); err != nil {
		return nil, fmt.Errorf("writing the state file: %w", err)
	}
	return &hookRoot{rootfs: rootfs, ldCache: cache, state: f}, nil
}

// specHook returns the hook of the spec whose argv[1] is sub.
func specHook(spec *specs.Spec, sub string) (*specs.Hook, error) {
	for _, h := range spec.ContainerEdits.Hooks {
		if len(h.Args) > 1 && h.Args[1] == sub {
			return h, nil
		}
	}
	return nil, fmt.Errorf("the generated spec has no %s hook", sub)
}

func (r *hookRoot) resetCache() error {
	p := filepath.Join(r.rootfs, "etc/ld.so.cache")
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", p, err)
	}
	if err := os.WriteFile(p, r.ldCache, 0o644); err != nil {
		return fmt.Errorf("restoring %s: %w", p, err)
	}
	return nil
}

// splitSetupHook returns the update-ldcache and create-symlinks hooks that
// do the --folder and the --link parts of a setup-libraries hook.
func splitSetupHook(h *specs.Hook) (ld, ln *specs.Hook) {
	ld = &specs.Hook{HookName: h.HookName, Path: h.Path, Env: h.Env, Args: []string{h.Args[0], "update-ldcache"}}
	ln = &specs.Hook{HookName: h.HookName, Path: h.Path, Env: h.Env, Args: []string{h.Args[0], "create-symlinks"}}
	for i := 2; i+1 < len(h.Args); i += 2 {
		switch h.Args[i] {
		case "--folder":
			ld.Args = append(ld.Args, h.Args[i], h.Args[i+1])
		case "--link":
			ln.Args = append(ln.Args, h.Args[i], h.Args[i+1])
		}
	}
	return ld, ln
}

// removeLinks removes what create-symlinks made (the L of each --link T::L).
func (r *hookRoot) removeLinks(args []string) error {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--link=")
		if !ok && a == "--link" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if !ok {
			continue
		}
		_, link, found := strings.Cut(v, "::")
		if !found {
			return fmt.Errorf("unexpected --link %q", v)
		}
		p := filepath.Join(r.rootfs, filepath.Clean("/"+link))
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", p, err)
		}
	}
	return nil
}

// benchHooks runs the hooks of the generated spec as runc would (argv and
// env of the spec, container state on stdin) on a glibc image root, each
// time as for a fresh container: the image's ld.so.cache restored and the
// links removed before the run.
func (b *bench) benchHooks() []Row {
	const section = "3"
	fx, err := b.fixtures()
	if err != nil {
		return []Row{failRow(section, "fixtures", err)}
	}
	// The spec has one hook, setup-libraries; its two jobs are also timed
	// alone, as the update-ldcache and create-symlinks subcommands.
	setup, err := specHook(fx.spec, "setup-libraries")
	if err != nil {
		return []Row{failRow(section, "setup-libraries", err)}
	}
	ldHook, lnHook := splitSetupHook(setup)
	disk, err := b.hookRoot(fx, fx.rootfs, fx.ldCache, "disk")
	if err != nil {
		return []Row{failRow(section, "image root on disk", err)}
	}
	shmRootfs := filepath.Join(b.shm, "rootfs")
	shmCache, err := buildGlibcRootfs(shmRootfs)
	if err != nil {
		return []Row{failRow(section, "image root on tmpfs", err)}
	}
	shm, err := b.hookRoot(fx, shmRootfs, shmCache, "tmpfs")
	if err != nil {
		return []Row{failRow(section, "image root on tmpfs", err)}
	}
	argv := func(h *specs.Hook) []string { return append([]string{h.Path}, h.Args[1:]...) }
	noReset := func() error { return nil }
	bothReset := func(r *hookRoot) func() error {
		return func() error {
			if err := r.resetCache(); err != nil {
				return err
			}
			return r.removeLinks(lnHook.Args)
		}
	}
	cases := []*hookCase{
		{
			name: "setup-libraries (the spec's hook: cache and links), fresh image root on disk (ext4)", target: true,
			argv: argv(setup), env: setup.Env, stdin: disk.state, reset: bothReset(disk),
		},
		{name: "its update-ldcache part alone, same root", argv: argv(ldHook), env: ldHook.Env, stdin: disk.state, reset: disk.resetCache},
		{
			name: "its create-symlinks part alone, same root", argv: argv(lnHook), env: lnHook.Env, stdin: disk.state,
			reset: func() error { return disk.removeLinks(lnHook.Args) },
		},
		{name: "setup-libraries, fresh image root on tmpfs", argv: argv(setup), env: setup.Env, stdin: shm.state, reset: bothReset(shm)},
		{name: "setup-libraries, cache and links already there (second container on the same root)", argv: argv(setup), env: setup.Env, stdin: shm.state, reset: noReset},
	}
	// Floors: what starting any process, and any static Go program, costs
	// here; a hook cannot be faster.
	if trueBin, err := lookPath("true"); err == nil {
		cases = append(cases, &hookCase{name: "floor: /bin/true (C, dynamic)", argv: []string{trueBin}, reset: noReset})
	}
	if noop := filepath.Join(b.bin, "xpu-bench-noop"); fileExists(noop) {
		cases = append(cases, &hookCase{name: "floor: empty static Go program", argv: []string{noop}, reset: noReset})
	}
	const warmup = 2
	for i := range 2*b.runs + warmup {
		for _, c := range cases {
			if err := c.reset(); err != nil {
				return []Row{failRow(section, c.name, err)}
			}
			r, err := b.p.timed(cmdSpec{argv: c.argv, env: c.env, stdin: c.stdin})
			if err != nil {
				return []Row{failRow(section, c.name, err)}
			}
			if i >= warmup {
				c.times = append(c.times, r.wall)
			}
		}
	}
	// setup-libraries must do both jobs: on a reset root, the cache names
	// libxpurt and the links exist.
	if err := bothReset(disk)(); err != nil {
		return []Row{failRow(section, "hook results", err)}
	}
	if _, err := b.p.timed(cmdSpec{argv: argv(setup), env: setup.Env, stdin: disk.state}); err != nil {
		return []Row{failRow(section, "setup-libraries", err)}
	}
	if err := verifyHooks(disk.rootfs, lnHook.Args); err != nil {
		return []Row{failRow(section, "hook results", err)}
	}
	var rows []Row
	for _, c := range cases {
		row := Row{
			Section: section,
			Name:    fmt.Sprintf("hook %s (median of %d)", c.name, len(c.times)),
			Value:   fmt.Sprintf("%s (p90 %s)", ms(c.times.median()), ms(c.times.quantile(0.9))),
			Status:  Info,
		}
		if c.target {
			row.Target = "< " + ms(hookMax)
			row.Status = check(c.times.median() < hookMax)
		}
		rows = append(rows, row)
	}
	return rows
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func verifyHooks(rootfs string, linkArgs []string) error {
	cache, err := os.ReadFile(filepath.Join(rootfs, "etc/ld.so.cache"))
	if err != nil {
		return fmt.Errorf("reading the image's cache: %w", err)
	}
	if !strings.Contains(string(cache), "libxpurt.so.1") {
		return errors.New("update-ldcache ran but the image's ld.so.cache does not name libxpurt.so.1")
	}
	for _, a := range linkArgs {
		if _, link, ok := strings.Cut(a, "::"); ok {
			if _, err := os.Lstat(filepath.Join(rootfs, filepath.Clean("/"+link))); err != nil {
				return fmt.Errorf("create-symlinks ran but %s is missing: %w", link, err)
			}
		}
	}
	return nil
}
