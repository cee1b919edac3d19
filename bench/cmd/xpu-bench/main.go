// Command xpu-bench measures what xpu-cdi adds to container starts and how
// spec generation scales, side by side with plain runc and Podman, and
// prints one table (also written as markdown). hack/bench.sh builds the
// binaries and runs it as root; see docs/benchmarks.md.
//
// Every comparison is interleaved (A B B A ...) in one run, and reported as
// medians and ratios: the machines this runs on are shared and noisy, so
// absolute times are only indicative.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
)

// sections in the order they run and print.
var allSections = []string{"generate", "gobench", "shim", "hooks", "podman", "concurrent"}

// bench holds what every section needs.
type bench struct {
	bin      string // directory with xpu-cdi, xpu-runtime-hook and maybe xpu-container-runtime
	shim     string // path of xpu-container-runtime, "" when not built
	shimWhy  string // why there is no shim
	runc     string
	shm      string // tmpfs work directory
	disk     string // disk work directory (container roots, Podman storage)
	cache    string // fakehost ELF cache
	runs     int    // measured runs per configuration (scaled per section)
	vendor   string // unique CDI vendor of this run
	gobench  string
	fx       *fixtures
	setups   []*shimSetup // prepareShim's, shared by the shim and concurrent sections
	p        *proc
	cleanups *cleanups
	log      func(format string, args ...any)
}

// cleanups run in reverse order, at the end or on SIGINT/SIGTERM.
type cleanups struct {
	mu  sync.Mutex
	fns []func()
}

func (c *cleanups) add(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, f)
}

func (c *cleanups) run() {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	for _, f := range slices.Backward(fns) {
		f()
	}
}

// testVendorDomain ends every vendor this program writes a spec for: real
// specs (baidu.com) are never touched.
const testVendorDomain = ".xpu-cdi.test"

func uniqueVendor() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return "bench-" + hex.EncodeToString(b[:]) + testVendorDomain, nil
}

func main() {
	os.Exit(run1())
}

func run1() int {
	var (
		b        = &bench{cleanups: &cleanups{}}
		out      = flag.String("out", "bench/results.md", "markdown file the results are written to (\"\" for none)")
		only     = flag.String("only", "", "comma-separated sections to run (default all): "+strings.Join(allSections, ","))
		shimPath = flag.String("shim", "", "xpu-container-runtime to measure (default: BIN/xpu-container-runtime when it exists)")
		noShim   = flag.String("no-shim-reason", "", "say why there is no shim (printed in its rows)")
	)
	flag.StringVar(&b.bin, "bin", "bin", "directory with the built xpu-cdi and xpu-runtime-hook")
	flag.StringVar(&b.shm, "tmpfs", "/dev/shm", "tmpfs directory for fake hosts and bundles")
	flag.StringVar(&b.disk, "disk", "/var/tmp", "disk directory for container roots and Podman storage")
	flag.StringVar(&b.cache, "elf-cache", filepath.Join(os.TempDir(), "xpu-cdi-test-elf-cache"), "fakehost ELF template cache")
	flag.IntVar(&b.runs, "runs", 30, "measured runs per configuration (sections scale it)")
	flag.StringVar(&b.gobench, "gobench", "", "output of `go test -bench -benchmem` to summarize")
	flag.Parse()
	b.log = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "xpu-bench: "+format+"\n", args...)
	}

	sections := allSections
	if *only != "" {
		sections = strings.Split(*only, ",")
		for _, s := range sections {
			if !slices.Contains(allSections, s) {
				b.log("unknown section %q (valid: %s)", s, strings.Join(allSections, ", "))
				return 2
			}
		}
	}
	if err := b.setup(*shimPath, *noShim); err != nil {
		b.log("%v", err)
		b.cleanups.run()
		return 1
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		b.log("%s: cleaning up", s)
		b.cleanups.run()
		os.Exit(130)
	}()

	start := time.Now()
	var rows []Row
	for _, s := range allSections {
		if !slices.Contains(sections, s) {
			continue
		}
		t0 := time.Now()
		b.log("section %s ...", s)
		rows = append(rows, b.section(s)...)
		b.log("section %s done in %s", s, time.Since(t0).Round(100*time.Millisecond))
	}
	b.cleanups.run()
	signal.Stop(sig)

	if err := writeText(os.Stdout, rows); err != nil {
		b.log("%v", err)
		return 1
	}
	if *out != "" {
		if err := writeResults(*out, rows, time.Since(start)); err != nil {
			b.log("%v", err)
			return 1
		}
		b.log("wrote %s", *out)
	}
	for _, r := range rows {
		if r.Status == Fail {
			return 1
		}
	}
	return 0
}

func (b *bench) section(s string) []Row {
	switch s {
	case "generate":
		return b.benchGenerate()
	case "gobench":
		return b.benchGo()
	case "shim":
		return b.benchShim()
	case "hooks":
		return b.benchHooks()
	case "podman":
		return b.benchPodman()
	case "concurrent":
		return b.benchConcurrent()
	}
	return nil
}

func (b *bench) setup(shimPath, noShimReason string) error {
	if os.Geteuid() != 0 {
		return errors.New("must run as root (runc, Podman, device nodes); use `sudo make bench`")
	}
	var err error
	if b.bin, err = filepath.Abs(b.bin); err != nil {
		return fmt.Errorf("resolving --bin: %w", err)
	}
	for _, name := range []string{"xpu-cdi", "xpu-runtime-hook"} {
		if _, err := os.Stat(filepath.Join(b.bin, name)); err != nil {
			return fmt.Errorf("%s not built: %w (run make build)", name, err)
		}
	}
	if shimPath == "" {
		shimPath = filepath.Join(b.bin, "xpu-container-runtime")
	}
	switch _, err := os.Stat(shimPath); {
	case noShimReason != "":
		b.shimWhy = noShimReason
	case err != nil:
		b.shimWhy = "not built yet"
	default:
		b.shim = shimPath
	}
	if b.runc, err = lookPath("runc"); err != nil {
		return err
	}
	if b.vendor, err = uniqueVendor(); err != nil {
		return err
	}
	// One private directory on tmpfs and one on disk, removed at the end.
	shm, err := os.MkdirTemp(b.shm, "xpu-bench-")
	if err != nil {
		return fmt.Errorf("creating a work directory in %s: %w", b.shm, err)
	}
	b.cleanups.add(func() { removeAll(shm) })
	b.shm = shm
	disk, err := os.MkdirTemp(b.disk, "xpu-bench-")
	if err != nil {
		return fmt.Errorf("creating a work directory in %s: %w", b.disk, err)
	}
	b.cleanups.add(func() { removeAll(disk) })
	b.disk = disk
	if err := os.MkdirAll(b.cache, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", b.cache, err)
	}
	if b.p, err = newProc(b.shm); err != nil {
		return err
	}
	b.cleanups.add(b.p.close)
	return nil
}

// removeAll unmounts whatever is still mounted below dir (a failed
// container or Podman cleanup) and removes it.
func removeAll(dir string) {
	unmountBelow(dir)
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(os.Stderr, "xpu-bench: removing %s: %v\n", dir, err)
	}
}

func unmountBelow(dir string) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return
	}
	// Deepest first.
	slices.SortFunc(mounts, func(a, b *mountinfo.Info) int { return len(b.Mountpoint) - len(a.Mountpoint) })
	for _, m := range mounts {
		_ = syscall.Unmount(m.Mountpoint, syscall.MNT_DETACH)
	}
}

func lookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH") + ":/usr/sbin:/usr/bin:/sbin:/bin") {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH: run hack/install-deps.sh", name)
}
