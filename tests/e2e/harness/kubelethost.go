package harness

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// KubeletLockPath is the lock file every test holds while it runs a
// kubelet (ClaimKubeletHost): a kubelet uses machine-global paths, so two
// test processes (two packages, or a developer's shell cluster next to a
// test run) take turns instead of colliding.
const KubeletLockPath = "/run/xpu-cdi-e2e-kubelet.lock"

// DevicePluginDir is the kubelet's device plugin directory. The kubelet
// hard-codes it (v1beta1.DevicePluginPath), whatever its --root-dir.
const DevicePluginDir = "/var/lib/kubelet/device-plugins"

// kubeletContainerLogs is where the kubelet links container logs, whatever
// its configuration (kubelet.DefaultContainerLogsDir).
const kubeletContainerLogs = "/var/log/containers"

// kubeletSysctls are the kernel tunables the kubelet sets when it starts
// (protectKernelDefaults: false); ClaimKubeletHost restores them.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// ClaimKubeletHost prepares the machine for one kubelet named node whose
// pod logs go to podLogsDir, and undoes it at cleanup: it takes
// KubeletLockPath (waiting while another test holds it), makes sure no other
// kubelet serves DevicePluginDir (created when missing, emptied and removed
// again at the end), saves the kernel tunables the kubelet sets, and removes
// the kubelet's links from /var/log/containers. Call it before starting a
// kubelet; NewCluster calls it.
func ClaimKubeletHost(t testing.TB, node, podLogsDir string) {
	t.Helper()
	RequiresRoot(t)
	lockKubelet(t)
	claimDevicePluginDir(t)
	saveSysctls(t)
	cleanContainerLogs(t, node, podLogsDir)
}

// lockKubelet takes an exclusive flock on KubeletLockPath until cleanup.
func lockKubelet(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(KubeletLockPath, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		t.Fatalf("opening the kubelet lock %s: %v", KubeletLockPath, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		t.Logf("waiting for %s: another test runs a kubelet", KubeletLockPath)
		start := time.Now()
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		t.Logf("took %s after %s", KubeletLockPath, time.Since(start).Round(time.Second))
	}
	if err != nil {
		_ = f.Close()
		t.Fatalf("locking %s: %v", KubeletLockPath, err)
	}
	// Closing the file releases the lock; the file itself stays (removing it
	// would let a waiter hold a lock on an unlinked inode).
	t.Cleanup(func() { _ = f.Close() })
}

// claimDevicePluginDir makes sure no kubelet serves DevicePluginDir and
// removes what the test's kubelet and plugins left there at the end.
func claimDevicePluginDir(t testing.TB) {
	t.Helper()
	sock := filepath.Join(DevicePluginDir, "kubelet.sock")
	if c, err := net.Dial("unix", sock); err == nil {
		_ = c.Close()
		t.Fatalf("a kubelet is already serving %s: a test kubelet needs the machine's device plugin directory to itself", sock)
	}
	var created []string
	for _, d := range []string{"/var/lib/kubelet", DevicePluginDir} {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(d, 0o750); err != nil {
				t.Fatalf("creating %s: %v", d, err)
			}
			created = append(created, d)
		}
	}
	t.Cleanup(func() {
		// The kubelet's checkpoint and sockets; then what the test created.
		entries, _ := os.ReadDir(DevicePluginDir)
		for _, e := range entries {
			_ = os.Remove(filepath.Join(DevicePluginDir, e.Name()))
		}
		for i := len(created) - 1; i >= 0; i-- {
			if err := os.Remove(created[i]); err != nil {
				t.Errorf("removing %s: %v", created[i], err)
			}
		}
	})
}

// saveSysctls restores the kubelet's kernel tunables at the end.
func saveSysctls(t testing.TB) {
	t.Helper()
	saved := map[string][]byte{}
	for _, s := range kubeletSysctls {
		data, err := os.ReadFile("/proc/sys/" + s)
		if err != nil {
			t.Fatalf("reading sysctl %s: %v", s, err)
		}
		saved[s] = data
	}
	t.Cleanup(func() {
		for s, v := range saved {
			if err := os.WriteFile("/proc/sys/"+s, v, 0o644); err != nil {
				t.Errorf("restoring sysctl %s to %s: %v", s, strings.TrimSpace(string(v)), err)
			}
		}
	})
}

// cleanContainerLogs removes the kubelet's links from /var/log/containers
// at the end (those into podLogsDir, and those of node's static pods, named
// <name>-<node>_...), and the directory if it did not exist before.
func cleanContainerLogs(t testing.TB, node, podLogsDir string) {
	t.Helper()
	_, err := os.Stat(kubeletContainerLogs)
	existed := err == nil
	t.Cleanup(func() {
		links, _ := filepath.Glob(filepath.Join(kubeletContainerLogs, "*.log"))
		for _, l := range links {
			target, err := os.Readlink(l)
			if err != nil {
				continue
			}
			if strings.HasPrefix(target, podLogsDir+"/") || strings.Contains(filepath.Base(l), "-"+node+"_") {
				_ = os.Remove(l)
			}
		}
		if !existed {
			if err := os.Remove(kubeletContainerLogs); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("removing %s: %v", kubeletContainerLogs, err)
			}
		}
	})
}

// FreePort returns a loopback TCP port nobody listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatalf("closing the listener of port %d: %v", port, err)
	}
	return port
}
