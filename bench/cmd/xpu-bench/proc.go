package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	if err != nil {
		return r, fmt.Errorf("%s: %w: %s", strings.Join(c.argv, " "), err, p.stderr())
	}
	return r, nil
}

// timeBin reports peak RSS. It is needed because a child forked by this
// (Go, CLONE_VM) program starts on this program's memory: wait4's ru_maxrss
// of the child then counts this program's resident set too. GNU time forks
// from its own small image.
const timeBin = "/usr/bin/time"

// peakRSS runs c under GNU time and returns its peak resident set in bytes
// (across an exec it is the larger of both images).
func (p *proc) peakRSS(c cmdSpec) (int64, error) {
	out, err := os.CreateTemp(filepath.Dir(p.errFile.Name()), "rss-*.txt")
	if err != nil {
		return 0, fmt.Errorf("creating a file for %s: %w", timeBin, err)
	}
	_ = out.Close()
	defer func() { _ = os.Remove(out.Name()) }()
	c.argv = append([]string{timeBin, "-f", "%M", "-o", out.Name()}, c.argv...)
	if _, err := p.timed(c); err != nil {
		return 0, err
	}
	data, err := os.ReadFile(out.Name())
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", out.Name(), err)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s printed %q, not a size in KiB: %w", timeBin, data, err)
	}
	return kib * 1024, nil
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
