package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc runs commands with files for stdio (never pipes: a container's init
// inherits runc's stdio and would keep a pipe open until it is deleted) and
// measures their wall time and peak RSS.
type proc struct {
	devNull *os.File
	errFile *os.File
}

func newProc(dir string) (*proc, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", os.DevNull, err)
	}
	errFile, err := os.CreateTemp(dir, "stderr-*.log")
	if err != nil {
		_ = null.Close()
		return nil, fmt.Errorf("creating a stderr file in %s: %w", dir, err)
	}
	return &proc{devNull: null, errFile: errFile}, nil
}

func (p *proc) close() {
	_ = p.devNull.Close()
	_ = p.errFile.Close()
	_ = os.Remove(p.errFile.Name())
}

// run is one measured process.
type run struct {
	wall time.Duration
	// maxRSS is the peak resident set of the process in bytes (wait4
	// rusage; across an exec it is the larger of both images).
	maxRSS int64
}

// cmdSpec describes a command to run.
type cmdSpec struct {
	argv  []string
	env   []string // nil: inherit
	stdin *os.File // nil: /dev/null; rewound before each run
}

// timed runs c and returns its wall time from fork to reaping. A non-zero
// exit is an error carrying the command's stderr.
func (p *proc) timed(c cmdSpec) (run, error) {
	if err := p.errFile.Truncate(0); err != nil {
		return run{}, fmt.Errorf("truncating %s: %w", p.errFile.Name(), err)
	}
	if _, err := p.errFile.Seek(0, io.SeekStart); err != nil {
		return run{}, fmt.Errorf("rewinding %s: %w", p.errFile.Name(), err)
	}
	stdin := p.devNull
	if c.stdin != nil {
		if _, err := c.stdin.Seek(0, io.SeekStart); err != nil {
			return run{}, fmt.Errorf("rewinding %s: %w", c.stdin.Name(), err)
		}
		stdin = c.stdin
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env = c.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, p.devNull, p.errFile
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	r := run{wall: wall}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru != nil {
		r.maxRSS = ru.Maxrss * 1024 // KiB on Linux
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w: %s", strings.Join(c.argv, " "), err, p.stderr())
	}
	return r, nil
}

// stderr returns what the last command wrote on stderr (at most 2 KiB).
func (p *proc) stderr() string {
	data, err := os.ReadFile(p.errFile.Name())
	if err != nil {
		return ""
	}
	if len(data) > 2048 {
		data = data[len(data)-2048:]
	}
	return strings.TrimSpace(string(data))
}

// output runs a setup command (not measured) and returns its combined
// output, failing with it on a non-zero exit.
func output(env []string, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || len(out) > 0 {
			return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		}
		return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return string(out), nil
}
