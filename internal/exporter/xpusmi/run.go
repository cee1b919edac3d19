package xpusmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"time"
)

// Defaults of a Runner.
const (
	DefaultTimeout   = 5 * time.Second
	DefaultMaxOutput = 1 << 20
	// maxStderr is how much of xpu-smi's stderr an error quotes.
	maxStderr = 512
)

// Errors of a run.
var (
	ErrTimeout      = errors.New("xpu-smi did not finish in time (killed)")
	ErrOutputTooBig = errors.New("xpu-smi printed more than allowed (killed)")
)

// Env is the whole environment xpu-smi runs with: nothing of the
// exporter's own. The library path is the XRE's (XRE 5's so/ is not in
// ld.so.cache), as the paths are inside the root xpu-smi runs in.
var Env = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"LD_LIBRARY_PATH=/usr/local/xpu/so:/usr/local/xpu/lib64:/usr/local/xpu/lib",
	"LANG=C", "LC_ALL=C",
}

// Config configures a Runner; zero fields take the defaults.
type Config struct {
	// Chroot runs xpu-smi inside a chroot into this root (the host's / as
	// the exporter's container sees it); the program path is then inside
	// it. It needs CAP_SYS_CHROOT.
	Chroot string
	// Timeout bounds one run (default DefaultTimeout).
	Timeout time.Duration
	// MaxOutput bounds the bytes one run may print (default DefaultMaxOutput).
	MaxOutput int
}

// Runner runs one xpu-smi program.
type Runner struct {
	path string
	o    Config
}

// NewRunner returns a runner of the program at path, which must be
// absolute (inside the chroot's root with cfg.Chroot).
func NewRunner(program string, cfg Config) (*Runner, error) {
	if !path.IsAbs(program) || path.Clean(program) != program {
		return nil, fmt.Errorf("xpu-smi path %q: must be an absolute, clean path", program)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	return &Runner{path: program, o: cfg}, nil
}

// Timeout is how long one run may take.
func (r *Runner) Timeout() time.Duration { return r.o.Timeout }

// String names the program and where it runs, for messages.
func (r *Runner) String() string {
	if r.o.Chroot != "" {
		return r.path + " (in a chroot into " + r.o.Chroot + ")"
	}
	return r.path
}

// Metrics runs `xpu-smi -m` and parses it (see ParseM); err is a failed run.
func (r *Runner) Metrics(ctx context.Context) (samples []Sample, lineErrs []error, err error) {
	out, err := r.Run(ctx, "-m")
	if err != nil {
		return nil, nil, err
	}
	samples, lineErrs = ParseM(out)
	return samples, lineErrs, nil
}

// Detail runs `xpu-smi -i index -q` and parses it (see ParseQ).
func (r *Runner) Detail(ctx context.Context, index int) (Detail, error) {
	out, err := r.Run(ctx, "-i", strconv.Itoa(index), "-q")
	if err != nil {
		return Detail{}, err
	}
	d, err := ParseQ(out)
	if err != nil {
		return Detail{}, fmt.Errorf("%s -i %d -q: %w", r, index, err)
	}
	return d, nil
}

// Run runs the program with args and returns what it printed on stdout. It
// kills the program's whole process group when the time is up or when it
// prints more than allowed.
func (r *Runner) Run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.path, args...)
	cmd.Env = Env
	cmd.Dir = "/"
	if err := sysProcAttr(cmd, r.o.Chroot); err != nil {
		return nil, err
	}
	cmd.WaitDelay = time.Second
	stderr := &capped{max: maxStderr}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("running %s: %w", r, err)
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if why := r.whyNotStarted(); why != nil {
				return nil, why
			}
		}
		return nil, fmt.Errorf("running %s: %w", r, err)
	}
	deadline, _ := ctx.Deadline()
	if f, ok := stdout.(*os.File); ok {
		// A child that escaped the process group may hold the pipe open.
		_ = f.SetReadDeadline(deadline.Add(cmd.WaitDelay))
	}
	out, readErr := readBounded(stdout, r.o.MaxOutput)
	if readErr != nil {
		cancel()
	}
	waitErr := cmd.Wait()
	what := r.String() + " " + strings.Join(args, " ")
	switch {
	case errors.Is(readErr, ErrOutputTooBig):
		return nil, fmt.Errorf("%s: %w: more than %d bytes", what, ErrOutputTooBig, r.o.MaxOutput)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%s: %w after %s", what, ErrTimeout, r.o.Timeout)
	case readErr != nil:
		return nil, fmt.Errorf("%s: reading its output: %w", what, readErr)
	case waitErr != nil:
		if msg := stderr.firstLine(); msg != "" {
			return nil, fmt.Errorf("%s: %w: %q", what, waitErr, msg)
		}
		return nil, fmt.Errorf("%s: %w", what, waitErr)
	}
	return out, nil
}

// readBounded reads r to its end, failing with ErrOutputTooBig past max bytes.
func readBounded(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, ErrOutputTooBig
	}
	return out, nil
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	max int
	buf bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capped) firstLine() string {
	line, _, _ := strings.Cut(strings.TrimSpace(c.buf.String()), "\n")
	return line
}
