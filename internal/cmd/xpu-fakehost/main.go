// Command xpu-fakehost builds a fake Kunlun XPU host tree for demos,
// end-to-end scripts and benchmarks:
//
//	xpu-fakehost --shape p800x8 --root /tmp/xpu-host [--json]
//	xpu-fakehost --shape scaled --devices 64 --libraries 500 --root DIR
//	xpu-fakehost --shape p800x8-sriov --root DIR --sriov
//
// It prints a summary on stderr and, with --json, the tree record on stdout.
// With --sriov it then runs the fake SR-IOV kernel on the tree in the
// foreground, printing every write to a sriov_numvfs and every node udev
// makes or removes, until SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

type flags struct {
	shape      string
	devices    int
	libraries  int
	root       string
	json       bool
	force      bool
	major      uint
	xreVersion string
	cacheDir   string
	noCtrl     bool
	noNodes    bool
	noSysfs    bool
	noProcfs   bool
	noDriver   bool
	noMknod    bool
	sriov      bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := newApp(os.Stdout, os.Stderr).RunContext(ctx, os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "xpu-fakehost: %v\n", err)
		os.Exit(1)
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	f := &flags{}
	return &cli.App{
		Name:      "xpu-fakehost",
		Usage:     "build a fake Kunlun XPU host tree (dev, proc, sys, XRE) under a directory",
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "shape", Usage: "host shape: " + strings.Join(fakehost.Shapes(), "|"), Value: fakehost.ShapeP800x8, Destination: &f.shape, EnvVars: []string{"XPU_CDI_FAKEHOST_SHAPE"}},
			&cli.IntFlag{Name: "devices", Usage: "number of devices (scaled shape)", Value: 8, Destination: &f.devices, EnvVars: []string{"XPU_CDI_FAKEHOST_DEVICES"}},
			&cli.IntFlag{Name: "libraries", Usage: "number of driver library files (scaled shape)", Value: 10, Destination: &f.libraries, EnvVars: []string{"XPU_CDI_FAKEHOST_LIBRARIES"}},
			&cli.StringFlag{Name: "root", Usage: "directory to build the tree in (must be empty or missing)", Required: true, Destination: &f.root, EnvVars: []string{"XPU_CDI_FAKEHOST_ROOT"}},
			&cli.BoolFlag{Name: "json", Usage: "print the tree record as JSON on stdout", Destination: &f.json},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing fake host tree in --root", Destination: &f.force},
			&cli.UintFlag{Name: "major", Usage: "xpu char major (default: the shape's: 195 for the driver 5.x shapes p800-xre5, p800-sysfs, p800-sriov and p800-quarters, else 243)", Destination: &f.major, EnvVars: []string{"XPU_CDI_FAKEHOST_MAJOR"}},
			&cli.StringFlag{Name: "xre-version", Usage: "XRE version (/usr/local/xpu-<version>; default: the shape's)", Destination: &f.xreVersion, EnvVars: []string{"XPU_CDI_FAKEHOST_XRE_VERSION"}},
			&cli.StringFlag{Name: "cache-dir", Usage: "build cache for the compiled ELF templates", Destination: &f.cacheDir, EnvVars: []string{"XPU_CDI_FAKEHOST_CACHE_DIR"}},
			&cli.BoolFlag{Name: "no-ctrl", Usage: "leave out /dev/xpuctrl", Destination: &f.noCtrl},
			&cli.BoolFlag{Name: "no-nodes", Usage: "module loaded but no /dev/xpu* nodes", Destination: &f.noNodes},
			&cli.BoolFlag{Name: "no-sysfs", Usage: "leave out sys/", Destination: &f.noSysfs},
			&cli.BoolFlag{Name: "no-procfs", Usage: "leave out proc/", Destination: &f.noProcfs},
			&cli.BoolFlag{Name: "no-driver", Usage: "leave out the XRE (usr/local/xpu, ld.so.conf.d, ld.so.cache)", Destination: &f.noDriver},
			&cli.BoolFlag{Name: "no-mknod", Usage: "write regular files instead of char devices even as root", Destination: &f.noMknod},
			&cli.BoolFlag{Name: "sriov", Usage: "then run the fake SR-IOV kernel on the tree's PFs (shapes " + strings.Join(sriovShapes(), ", ") + ") in the foreground until SIGINT or SIGTERM: writes to a PF's sriov_numvfs make and remove VFs as the kernel and the driver do, each printed on stderr; needs root and /dev/fuse", Destination: &f.sriov},
		},
		Before: func(*cli.Context) error { return f.validate() },
		Action: func(c *cli.Context) error { return run(c.Context, f, stdout, stderr) },
	}
}

func (f *flags) validate() error {
	valid := false
	for _, s := range fakehost.Shapes() {
		valid = valid || s == f.shape
	}
	if !valid {
		return fmt.Errorf("unknown --shape %q: valid shapes are %s", f.shape, strings.Join(fakehost.Shapes(), ", "))
	}
	if f.devices < 0 || f.libraries < 0 {
		return fmt.Errorf("--devices (%d) and --libraries (%d) must not be negative", f.devices, f.libraries)
	}
	if f.major > 4095 {
		return fmt.Errorf("--major %d is out of range (1-4095)", f.major)
	}
	if f.root == "" {
		return errors.New("--root is required")
	}
	if f.sriov {
		if !slices.Contains(sriovShapes(), f.shape) {
			return fmt.Errorf("--sriov: the %s shape has no card with SR-IOV; use one of %s", f.shape, strings.Join(sriovShapes(), ", "))
		}
		if f.noSysfs {
			return errors.New("--sriov with --no-sysfs: the fake kernel serves the PFs' sysfs directories")
		}
		if os.Geteuid() != 0 {
			return fmt.Errorf("--sriov needs root to mount FUSE (running as uid %d)", os.Geteuid())
		}
		if _, err := os.Stat("/dev/fuse"); err != nil {
			return fmt.Errorf("--sriov needs FUSE: %w", err)
		}
	}
	return nil
}

// sriovShapes are the shapes with a PF that has SR-IOV (TotalVFs), which
// --sriov can serve.
func sriovShapes() []string {
	var out []string
	for _, name := range fakehost.Shapes() {
		h, err := fakehost.ShapeByName(name, 0, 0)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(h.Devices, func(d fakehost.Device) bool { return d.Function == fakehost.FunctionPF && d.TotalVFs > 0 }) {
			out = append(out, name)
		}
	}
	return out
}

func run(ctx context.Context, f *flags, stdout, stderr io.Writer) error {
	h, err := fakehost.ShapeByName(f.shape, f.devices, f.libraries)
	if err != nil {
		return err
	}
	if f.major != 0 {
		h.Major = uint32(f.major)
	}
	if f.xreVersion != "" {
		h.XREVersion = f.xreVersion
	}
	h.NoCtrl = h.NoCtrl || f.noCtrl
	h.NoNodes = h.NoNodes || f.noNodes
	h.NoSysfs = h.NoSysfs || f.noSysfs
	h.NoProcfs = h.NoProcfs || f.noProcfs
	h.NoDriver = h.NoDriver || f.noDriver

	if err := prepareRoot(f.root, f.force); err != nil {
		return err
	}
	log := logrus.New()
	log.SetOutput(stderr)
	log.SetLevel(logrus.WarnLevel)
	opts := []fakehost.Option{fakehost.WithLogger(log)}
	if f.cacheDir != "" {
		opts = append(opts, fakehost.WithCacheDir(f.cacheDir))
	}
	if f.noMknod {
		opts = append(opts, fakehost.WithoutMknod())
	}
	t, err := fakehost.Build(f.root, h, opts...)
	if err != nil {
		return err
	}
	summarize(stderr, t)
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(t); err != nil {
			return fmt.Errorf("writing the tree record: %w", err)
		}
	}
	if f.sriov {
		return serveSRIOV(ctx, t, stderr)
	}
	return nil
}

// serveSRIOV runs the fake SR-IOV kernel on the tree until ctx ends (SIGINT,
// SIGTERM), then stops it: the PFs' directories are back in the tree with
// the VFs of the moment.
func serveSRIOV(ctx context.Context, t *fakehost.Tree, stderr io.Writer) error {
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, format+"\n", args...)
	}
	k, err := fakehost.StartSRIOV(t.Root, t.Host, fakehost.SRIOVOptions{Log: logf})
	if err != nil {
		return fmt.Errorf("--sriov: %w", err)
	}
	logf("fake SR-IOV kernel: runs until interrupted (Ctrl-C, or kill -INT %d); try:", os.Getpid())
	logf("  xpu-cdi partition show --dev-root %s --driver-root %s", t.Root, t.Root)
	logf("  xpu-cdi partition apply --layout all=2 --dev-root %s --driver-root %s", t.Root, t.Root)
	<-ctx.Done()
	logf("fake SR-IOV kernel: stopping with %s", layoutOf(k))
	if err := k.Close(); err != nil {
		return fmt.Errorf("--sriov: stopping the fake SR-IOV kernel: %w", err)
	}
	logf("fake SR-IOV kernel: stopped; the tree in %s keeps these VFs", t.Root)
	return nil
}

// layoutOf says the VF count of every PF the kernel serves.
func layoutOf(k *fakehost.SRIOVKernel) string {
	var parts []string
	for _, pf := range k.PFs() {
		parts = append(parts, fmt.Sprintf("%s %d VFs", pf, k.NumVFs(pf)))
	}
	return strings.Join(parts, ", ")
}

// prepareRoot refuses a non-empty root unless force is set and the root holds
// an earlier fake host (marker file), which is then removed.
func prepareRoot(root string, force bool) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("resolving --root %s: %w", root, err)
	}
	entries, err := os.ReadDir(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("reading --root %s: %w", abs, err)
	case len(entries) == 0:
		return nil
	case !force:
		return fmt.Errorf("--root %s is not empty: pass --force to replace an earlier fake host, or choose an empty directory", abs)
	}
	if _, err := os.Stat(filepath.Join(abs, fakehost.MarkerFile)); err != nil {
		return fmt.Errorf("--root %s is not empty and holds no %s, so it is not a fake host tree: refusing to delete it even with --force", abs, fakehost.MarkerFile)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(abs, e.Name())); err != nil {
			return fmt.Errorf("removing the old fake host in %s: %w", abs, err)
		}
	}
	return nil
}

func summarize(w io.Writer, t *fakehost.Tree) {
	nodes := 0
	for _, d := range t.Devices {
		if d.HasNode {
			nodes++
		}
	}
	kind := "char devices"
	if !t.RealNodes {
		kind = "regular files (not root: kernel facts in the JSON record are by intent)"
	}
	fmt.Fprintf(w, "fake %s host in %s: %d devices (%d nodes as %s), major %d, driver %s\n",
		t.Shape, t.Root, len(t.Devices), nodes, kind, t.Major, t.DriverVersion)
	if t.XREDir != "" {
		fmt.Fprintf(w, "  XRE %s: %d libraries, tools %v, ld.so.cache %s\n", t.XREDir, len(t.Libraries), t.Tools, t.LdCache)
	}
	fmt.Fprintf(w, "  use --dev-root %s --driver-root %s\n", t.Root, t.Root)
}
