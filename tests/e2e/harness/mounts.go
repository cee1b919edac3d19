package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	points := make([]string, 0, len(mounts))
	for _, m := range mounts {
		points = append(points, m.Mountpoint)
	}
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points, nil
}

// unmountUnder detaches every mount at or below dir (repeating, because
// stacked mounts show up one at a time).
func unmountUnder(dir string) error {
	dir = filepath.Clean(dir)
	var errs []error
	for range 5 {
		points, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, mp := range points {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killProcessesMentioning SIGKILLs every process whose command line contains
// marker (a unique temporary directory of one test) and waits briefly for
// them to go away. Containerd shims and conmon outlive their daemon; the
// marker guarantees only processes started for this test are touched.
func killProcessesMentioning(marker string) []int {
	if marker == "" || marker == "/" {
		return nil
	}
	var killed []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(marker)) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range killed {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return killed
}

// sharedMountNamespace starts a process that holds a mount namespace of its
// own, a copy of this one with every mount made shared (unshare --mount
// --propagation shared), and returns its path (/proc/PID/ns/mnt) for
// nsenter --mount. A node booted by systemd has / shared; this machine kind
// has it private, and the host's propagation is not the harness's to
// change: other tests see it. An engine that checks the propagation of a
// bind mount's source (CRI-O refuses the host's / as a hostPath on a
// private /) runs in this namespace instead, with what works with it (the
// kubelet). Files are the host's; mounts made in the namespace stay in it
// and go with it. The holder is killed at cleanup, after whatever was
// registered later (the engine) has stopped.
func sharedMountNamespace(t testing.TB) string {
	t.Helper()
	unshare := RequiresTool(t, "unshare")
	sleep := RequiresTool(t, "sleep")
	cmd := exec.Command(unshare, "--mount", "--propagation", "shared", "--", sleep, "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", unshare, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	ns := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "ns", "mnt")
	// Ready once unshare has made / shared and exec'd sleep: until then the
	// namespace may still be this one, or private.
	deadline := time.Now().Add(StartTimeout)
	for {
		select {
		case <-exited:
			t.Fatalf("%s --mount exited: %s", unshare, strings.TrimSpace(stderr.String()))
		default:
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "comm"))
		if strings.TrimSpace(string(comm)) == "sleep" {
			shared, err := rootShared(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "mountinfo"))
			if err != nil {
				t.Fatalf("the mount namespace of %s: %v", unshare, err)
			}
			if !shared {
				t.Fatalf("the mount namespace of %s: / is not shared", unshare)
			}
			return ns
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s --mount did not exec sleep within %s", unshare, StartTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rootShared reports whether the mount on / in path (a
// /proc/PID/mountinfo) is in a peer group (optional field shared:N).
func rootShared(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	// Every mount on / (stacked ones too) must be in a peer group.
	mounts, err := mountinfo.GetMountsFromReader(f, func(m *mountinfo.Info) (skip, stop bool) { return m.Mountpoint != "/", false })
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(mounts) == 0 {
		return false, fmt.Errorf("%s has no mount on /", path)
	}
	for _, m := range mounts {
		if !slices.ContainsFunc(strings.Fields(m.Optional), func(o string) bool { return strings.HasPrefix(o, "shared:") }) {
			return false, nil
		}
	}
	return true, nil
}
