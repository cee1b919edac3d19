package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartTimeout bounds how long a daemon may take to answer after it starts.
const StartTimeout = 60 * time.Second

// daemon is one engine process started by a test.
type daemon struct {
	name    string
	dir     string // private directory: config, state, sockets, log
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	// How to start it again (Restart).
	bin       string
	args, env []string
	ready     func() error
	// timeout bounds the start (StartTimeout unless startDaemonWithin).
	timeout time.Duration
	// Startup is how long the daemon took from exec to answering.
	startup time.Duration
}

// shortTempDir makes a private directory with a short path (unix socket
// paths are limited to 108 bytes; t.TempDir paths carry the test name) and
// removes it at cleanup, after unmounting whatever is left mounted below it.
// It is registered before the engine's own cleanup, so it runs last.
func shortTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatalf("creating temporary directory: %v", err)
	}
	// Engines resolve paths; keep the real one so mount points match.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	t.Cleanup(func() {
		killProcessesMentioning(dir)
		if err := unmountUnder(dir); err != nil {
			t.Errorf("cleaning up %s: %v", dir, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir
}

// startDaemon starts bin with args and env, logging to dir/<name>.log, and
// waits until ready returns nil. The daemon is stopped at cleanup: SIGTERM,
// then SIGKILL after 20 s.
func startDaemon(t testing.TB, name, dir, bin string, args, env []string, ready func() error) *daemon {
	t.Helper()
	return startDaemonWithin(t, StartTimeout, name, dir, bin, args, env, ready)
}

// startDaemonWithin is startDaemon with its own start timeout (the API
// server of a cluster takes longer than an engine on a busy machine).
func startDaemonWithin(t testing.TB, timeout time.Duration, name, dir, bin string, args, env []string, ready func() error) *daemon {
	t.Helper()
	d := &daemon{name: name, dir: dir, logPath: filepath.Join(dir, name+".log"), bin: bin, args: args, env: env, ready: ready, timeout: timeout}
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("%s log (%s), last lines:\n%s", name, d.logPath, d.logTail(30))
		}
	})
	d.start(t)
	return d
}

// start execs the daemon and waits until it is ready.
func (d *daemon) start(t testing.TB) {
	t.Helper()
	d.exited = make(chan struct{})
	d.waitErr = nil
	logFile, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("creating %s: %v", d.logPath, err)
	}
	cmd := exec.Command(d.bin, d.args...)
	cmd.Env = append(os.Environ(), d.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = d.dir
	// Own process group: a Ctrl-C on `go test` reaches the test binary,
	// whose cleanup stops the daemon in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	d.cmd = cmd
	start := time.Now()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		close(d.exited)
		t.Fatalf("starting %s (%s): %v", d.name, d.bin, err)
	}
	exited := d.exited
	go func() {
		d.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(exited)
	}()

	deadline := time.Now().Add(d.timeout)
	var lastErr error
	for {
		select {
		case <-exited:
			t.Fatalf("%s exited during startup (%v); log:\n%s", d.name, d.waitErr, d.logTail(30))
		default:
		}
		if lastErr = d.ready(); lastErr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %s: %v; log:\n%s", d.name, d.timeout, lastErr, d.logTail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.startup = time.Since(start)
	t.Logf("%s ready in %s (%s)", d.name, d.startup.Round(time.Millisecond), d.dir)
}

// Restart stops the daemon (SIGTERM, as at cleanup) and starts it again
// with the same command line, environment and directory, so that it reads
// its configuration files again; it returns once the daemon answers.
// Containers it ran are not removed first: stop them before if the engine
// does not keep them across restarts.
func (d *daemon) Restart(t testing.TB) {
	t.Helper()
	d.stop(t)
	d.start(t)
}

func (d *daemon) stop(t testing.TB) {
	t.Helper()
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		t.Logf("%s did not stop within 20 s of SIGTERM, killing it", d.name)
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// Log returns the daemon's log so far.
func (d *daemon) Log() string {
	data, err := os.ReadFile(d.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", d.logPath, err)
	}
	return string(data)
}

func (d *daemon) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(d.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Startup is how long the daemon took from exec until it answered.
func (d *daemon) Startup() time.Duration { return d.startup }

// writeFile writes data to path (mode 0644: engines and their users read
// these configuration files), creating parent directories.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
