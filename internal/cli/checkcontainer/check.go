// Package checkcontainer implements `xpu-cdi check-container`: run inside a
// container that was given XPUs, it checks what the container sees (the
// XPU device nodes, /dev/xpuctrl and xpu-smi). The chart's `helm test`
// validator runs it; it works in the project's FROM-scratch image, so it
// needs nothing of the image but itself.
package checkcontainer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
)

// xpuSMIPaths are where the CDI spec puts xpu-smi (the host's paths: XRE 4
// links /usr/local/bin/xpu-smi to xpu_smi, XRE 5 has /usr/local/xpu/bin).
var xpuSMIPaths = []string{"/usr/local/bin/xpu-smi", "/usr/local/xpu/bin/xpu-smi", "/usr/local/bin/xpu_smi", "/usr/local/xpu/bin/xpu_smi"}

// nodeName is an XPU's device node (not the control node).
var nodeName = regexp.MustCompile(`^xpu[0-9]+$`)

type options struct {
	root     string
	devices  int
	smi      string
	noSMI    bool
	smiLimit time.Duration
	copyTo   string
}

// NewCommand returns `xpu-cdi check-container`.
func NewCommand(log *logrus.Logger) *cli.Command {
	o := &options{}
	return &cli.Command{
		Name:  "check-container",
		Usage: "Check, inside a container given XPUs, its device nodes, /dev/xpuctrl and xpu-smi",
		Description: `Run inside a container that asked for XPUs (the chart's helm test runs it in a pod asking
for one). It checks:
  - exactly --devices XPU device nodes /dev/xpuN, each a character device (not a link);
  - /dev/xpuctrl, a character device of the same driver (major) as the XPUs;
  - xpu-smi (XPU_CDI_XPU_SMI, else the first of PATH, /usr/local/bin/xpu-smi,
    /usr/local/xpu/bin/xpu-smi and their xpu_smi names): an executable regular file, which is run
    and must exit 0. A dynamically linked xpu-smi (XRE 5's) needs its ELF interpreter in the
    container: the project's image is FROM scratch, so where the interpreter is missing the check
    fails, naming it (run check-container in an image with glibc: the chart's tests.image).
    --no-xpu-smi leaves xpu-smi out (nodes-only specs).
Each check prints a line; the command fails, naming every check that failed.

--copy-to FILE copies this (static) xpu-cdi to FILE and exits: the chart's validator copies it
from its image into the image with glibc it then runs in.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "devices", Value: 1, Usage: "number of XPU device nodes the container must see", EnvVars: []string{"XPU_CDI_CHECK_DEVICES"}, Destination: &o.devices},
			&cli.StringFlag{Name: "root", Value: "/", Usage: "the container's root (tests)", EnvVars: []string{"XPU_CDI_CHECK_ROOT"}, Destination: &o.root},
			&cli.StringFlag{Name: "xpu-smi", Usage: "path of xpu-smi inside the root; default: searched (above)", EnvVars: []string{"XPU_CDI_XPU_SMI"}, Destination: &o.smi},
			&cli.BoolFlag{Name: "no-xpu-smi", Usage: "do not check xpu-smi (a spec generated with --nodes-only)", EnvVars: []string{"XPU_CDI_CHECK_NO_XPU_SMI"}, Destination: &o.noSMI},
			&cli.StringFlag{Name: "copy-to", Usage: "copy this xpu-cdi to `FILE` (created, not replaced) and exit", EnvVars: []string{"XPU_CDI_CHECK_COPY_TO"}, Destination: &o.copyTo},
			&cli.DurationFlag{Name: "xpu-smi-timeout", Value: 30 * time.Second, Usage: "how long xpu-smi may run", EnvVars: []string{"XPU_CDI_XPU_SMI_TIMEOUT"}, Destination: &o.smiLimit},
		},
		Before: func(*cli.Context) error {
			if o.devices < 1 {
				return fmt.Errorf("--devices %d: must be 1 or more", o.devices)
			}
			if !filepath.IsAbs(o.root) {
				return fmt.Errorf("--root %q: must be an absolute path", o.root)
			}
			if o.copyTo != "" && !filepath.IsAbs(o.copyTo) {
				return fmt.Errorf("--copy-to %q: must be an absolute path", o.copyTo)
			}
			return nil
		},
		Action: func(c *cli.Context) error {
			if o.copyTo != "" {
				return copySelf(o.copyTo)
			}
			return o.check(c.Context, c.App.Writer)
		},
	}
}

// check runs every check, printing one line each, and joins the failures.
func (o *options) check(ctx context.Context, w io.Writer) error {
	var failed []error
	report := func(what string, err error) {
		if err != nil {
			fmt.Fprintf(w, "FAIL %s: %v\n", what, err)
			failed = append(failed, fmt.Errorf("%s: %w", what, err))
			return
		}
		fmt.Fprintf(w, "ok   %s\n", what)
	}
	dev := filepath.Join(o.root, "dev")
	majors, names, err := xpuNodes(dev)
	report(fmt.Sprintf("%d XPU device node(s) %v", o.devices, names), func() error {
		if err != nil {
			return err
		}
		if len(names) != o.devices {
			return fmt.Errorf("the container sees %d XPU device node(s) in /dev, not %d", len(names), o.devices)
		}
		return nil
	}())
	report("/dev/xpuctrl", func() error {
		major, err := charMajor(filepath.Join(dev, "xpuctrl"))
		if err != nil {
			return err
		}
		for _, m := range majors {
			if m != major {
				return fmt.Errorf("major %d, but an XPU node has major %d: not the same driver", major, m)
			}
		}
		return nil
	}())
	if o.noSMI {
		fmt.Fprintln(w, "--   xpu-smi: not checked (--no-xpu-smi)")
	} else {
		what, err := o.checkSMI(ctx)
		report("xpu-smi "+what, err)
	}
	return errors.Join(failed...)
}

// xpuNodes returns the majors and the names of the XPU nodes in dev.
func xpuNodes(dev string) ([]uint32, []string, error) {
	entries, err := os.ReadDir(dev)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", dev, err)
	}
	var majors []uint32
	var names []string
	var errs []error
	for _, e := range entries {
		if !nodeName.MatchString(e.Name()) {
			continue
		}
		names = append(names, "/dev/"+e.Name())
		m, err := charMajor(filepath.Join(dev, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		majors = append(majors, m)
	}
	return majors, names, errors.Join(errs...)
}

// charMajor returns the major of the character device at path, which must
// not be a symlink.
func charMajor(path string) (uint32, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if fi.Mode()&os.ModeCharDevice == 0 || fi.Mode()&os.ModeDevice == 0 {
		return 0, fmt.Errorf("%s is not a character device (%s)", path, fi.Mode().Type())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no device number", path)
	}
	return unix.Major(st.Rdev), nil
}

// checkSMI finds xpu-smi and runs it where it can run; what says which
// file and what was done.
func (o *options) checkSMI(ctx context.Context) (what string, err error) {
	path, err := o.findSMI()
	if err != nil {
		return "", err
	}
	host := filepath.Join(o.root, path)
	fi, err := os.Stat(host)
	if errors.Is(err, fs.ErrNotExist) {
		return path, fmt.Errorf("%s not found", path)
	} else if err != nil {
		return path, err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return path, fmt.Errorf("%s is not an executable file (%s)", path, fi.Mode())
	}
	interp, err := interpreter(host)
	if err != nil {
		return path, err
	}
	if interp != "" {
		if _, err := os.Stat(filepath.Join(o.root, interp)); err != nil {
			return path, fmt.Errorf("%w: %s is linked dynamically and this container has no %s, its ELF interpreter (the CDI spec gives the driver's libraries, not glibc): run check-container in an image with glibc (the chart's tests.image)", ErrNoInterpreter, path, interp)
		}
	}
	if o.root != "/" {
		return fmt.Sprintf("%s (present; not run: --root is not /)", path), nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.smiLimit)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return path, fmt.Errorf("running %s: %w: %s", path, err, firstLines(out.String(), 5))
	}
	return fmt.Sprintf("%s (ran: %s)", path, firstLines(out.String(), 1)), nil
}

// ErrNoInterpreter: xpu-smi is linked dynamically and the container lacks
// its ELF interpreter, so it cannot run.
var ErrNoInterpreter = errors.New("xpu-smi cannot run here")

// copySelf copies the running executable to dst, which must not exist
// (O_EXCL, no link followed).
func copySelf(dst string) (err error) {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("--copy-to: opening this executable: %w", err)
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o755)
	if err != nil {
		return fmt.Errorf("--copy-to %s: %w", dst, err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("--copy-to %s: %w", dst, cerr)
		}
		if err != nil {
			_ = os.Remove(dst)
		}
	}()
	if _, err := io.Copy(out, src); err != nil {
		return fmt.Errorf("--copy-to %s: %w", dst, err)
	}
	return nil
}

// findSMI returns the path of xpu-smi inside the root.
func (o *options) findSMI() (string, error) {
	if o.smi != "" {
		return o.smi, nil
	}
	candidates := slices.Clone(xpuSMIPaths)
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if filepath.IsAbs(d) {
			candidates = append([]string{filepath.Join(d, "xpu-smi")}, candidates...)
		}
	}
	for _, p := range candidates {
		if _, err := os.Stat(filepath.Join(o.root, p)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in PATH nor at %s (a spec generated with --nodes-only has none: --no-xpu-smi)", strings.Join(xpuSMIPaths, ", "))
}

// interpreter returns the loader of an executable (its ELF interpreter, or
// the interpreter of a "#!" line), "" for a static one.
func interpreter(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	interp, err := elfso.Interpreter(f, fi.Size())
	if err != nil {
		return "", fmt.Errorf("reading the loader of %s: %w", path, err)
	}
	return interp, nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " / ")
}
