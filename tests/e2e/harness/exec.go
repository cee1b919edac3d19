package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// CommandTimeout bounds every engine command the harness runs, so a hung
// engine fails the test instead of eating CI's time budget.
const CommandTimeout = 3 * time.Minute

// Result is the outcome of a command that ran to completion.
type Result struct {
	Args     []string
	Stdout   string
	Stderr   string
	ExitCode int
	Duration time.Duration
}

// Success reports whether the command exited with status 0.
func (r Result) Success() bool { return r.ExitCode == 0 }

// String describes the command and its output, for failure messages.
func (r Result) String() string {
	return fmt.Sprintf("$ %s\nexit status %d after %s\n--- stdout ---\n%s\n--- stderr ---\n%s",
		strings.Join(r.Args, " "), r.ExitCode, r.Duration.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// RequireSuccess fails the test when the command did not exit with status 0.
func (r Result) RequireSuccess(t testing.TB) Result {
	t.Helper()
	if !r.Success() {
		t.Fatalf("command failed:\n%s", r)
	}
	return r
}

// command describes how to run one engine's CLI.
type command struct {
	bin  string
	args []string // global arguments put before the caller's
	env  []string // added to os.Environ(), later entries win
}

// run executes the command with extra arguments. A command that cannot be
// started or that times out fails the test; a non-zero exit status is
// returned in the Result.
func (c command) run(t testing.TB, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	argv := append(append([]string{}, c.args...), args...)
	cmd := exec.CommandContext(ctx, c.bin, argv...)
	cmd.Env = append(os.Environ(), c.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := Result{
		Args:     append([]string{c.bin}, argv...),
		Stdout:   stdout.String(),
		Stderr:   stderr.String(),
		Duration: time.Since(start),
	}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("command timed out after %s:\n%s", CommandTimeout, res)
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", c.bin, err)
	}
	return res
}

// pathEnv is the PATH variable naming path.
func pathEnv(path string) string { return "PATH=" + path }

// systemPath is the PATH engines run with unless a harness needs its own
// tools first: Debian's binaries only.
const systemPath = "/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"
