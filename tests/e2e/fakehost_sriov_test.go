package e2e

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestFakehostSRIOVFromShell runs the shell session of docs/partitions.md:
// `xpu-fakehost --shape p800x8-sriov --sriov` in the background, then
// xpu-cdi against its tree. all=4 (8 PFs and 32 VFs: 40 handles, more than
// the driver's 32) is refused with nothing written; all=2 cuts the 8 cards
// into halves through the fake kernel, which prints every write and every
// node udev makes. SIGINT stops it cleanly: exit status 0, no mount left,
// and the tree keeps the halves.
func TestFakehostSRIOVFromShell(t *testing.T) {
	harness.RequiresRoot(t)
	testreq.FUSE(t, "xpu-fakehost --sriov")
	root := filepath.Join(t.TempDir(), "host")
	cmd := exec.Command(Binary(t, "xpu-fakehost"), "--shape", "p800x8-sriov", "--root", root, "--sriov", "--cache-dir", fakehosttest.CacheDir(t))
	// A file, not a pipe: Wait then waits for the process alone, not for
	// every holder of the pipe (go-fuse's fusermount).
	logFile, err := os.Create(filepath.Join(t.TempDir(), "xpu-fakehost.log"))
	require.NoError(t, err)
	defer logFile.Close()
	log := fileLog(logFile.Name())
	cmd.Stdout, cmd.Stderr = io.Discard, logFile
	require.NoError(t, cmd.Start())
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("xpu-fakehost (pid %d) did not exit after SIGKILL", cmd.Process.Pid)
			}
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "runs until interrupted") },
		time.Minute, 100*time.Millisecond, "xpu-fakehost --sriov:\n%s", log)
	require.Contains(t, log.String(), "fake SR-IOV kernel: serving 0000:01:00.0, 0000:02:00.0, 0000:03:00.0, 0000:04:00.0, 0000:81:00.0, 0000:82:00.0, 0000:83:00.0, 0000:84:00.0 under "+root)
	roots := []string{"--dev-root", root, "--driver-root", root}

	stdout, stderr, err := runXPUCDI(t, append([]string{"partition", "apply", "--layout", "all=4"}, roots...)...)
	require.Error(t, err, stdout)
	require.Contains(t, stderr, "the layout needs 40 device handles (every PF and every VF takes one: 8 PFs + 32 VFs), more than the 32 the Kunlun3 driver supports per node")
	require.NotContains(t, log.String(), "write ", "a refused layout writes nothing")

	stdout, stderr, err = runXPUCDI(t, append([]string{"partition", "apply", "--layout", "all=2"}, roots...)...)
	require.NoError(t, err, "%s\n%s", stdout, stderr)
	require.Contains(t, stdout, "layout: all=0 -> all=2")
	require.Contains(t, stdout, "handles: 8 -> 24 used of 32")
	require.Contains(t, stderr, "card 0 (0000:01:00.0): sriov_numvfs 0 -> 2", "a progress line per write")
	require.Equal(t, 8, strings.Count(log.String(), "/sriov_numvfs: 0 -> 2 VFs"), log.String())
	require.Equal(t, 16, strings.Count(log.String(), "udev: created /dev/xpu"), log.String())

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case <-done:
		var exit *exec.ExitError
		require.False(t, errors.As(waitErr, &exit), "exit status after SIGINT: %v\n%s", waitErr, log)
		require.NoError(t, waitErr)
	case <-time.After(30 * time.Second):
		t.Fatalf("xpu-fakehost did not stop within 30 s of SIGINT:\n%s", log)
	}
	require.Contains(t, log.String(), "fake SR-IOV kernel: stopping with 0000:01:00.0 2 VFs, ")
	require.Contains(t, log.String(), "fake SR-IOV kernel: stopped; the tree in "+root+" keeps these VFs")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mounts), root, "no mount left in the tree")
	stdout, stderr, err = runXPUCDI(t, append([]string{"partition", "show"}, roots...)...)
	require.NoError(t, err, stderr)
	require.Contains(t, stdout, "layout: all=2", "the stopped tree keeps the halves")
}

// fileLog is the text of a log file, read anew at each String.
type fileLog string

func (f fileLog) String() string {
	data, _ := os.ReadFile(string(f))
	return string(data)
}
