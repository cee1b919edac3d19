package fakehost_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// numvfs is the host path of a PF's sriov_numvfs, through the bus link as
// the partition code writes it.
func numvfs(tree *fakehost.Tree, pf string) string {
	return tree.Path("/sys/bus/pci/devices/" + pf + "/sriov_numvfs")
}

// writeNumVFs writes value as `echo value > sriov_numvfs` does (O_TRUNC).
func writeNumVFs(tree *fakehost.Tree, pf, value string) error {
	return os.WriteFile(numvfs(tree, pf), []byte(value+"\n"), 0o644)
}

func readNumVFs(t *testing.T, tree *fakehost.Tree, pf string) string {
	t.Helper()
	b, err := os.ReadFile(numvfs(tree, pf))
	require.NoError(t, err)
	return string(b)
}

// devices discovers the tree and renders each device (they are found by
// their nodes) as "xpuN address model memory parentNumVFs minor", a PF's
// VF count written as minus its own.
func devices(t *testing.T, tree *fakehost.Tree) []string {
	t.Helper()
	h, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	var out []string
	for i := range h.Devices {
		d := h.Devices[i]
		parent := 0
		if d.PCI != nil {
			parent = d.PCI.ParentNumVFs
			if d.PCI.Function == discover.FunctionPF {
				parent = -d.PCI.NumVFs // a PF: minus its VF count
			}
		}
		out = append(out, fmt.Sprintf("xpu%d %s %s %d %d %d", d.Index, d.Address(), d.Model, h.FactsOf(d).MemoryMiB, parent, d.Node.Minor))
	}
	return out
}

// nodeMinor is the minor of a real char node, -1 when it is not there.
func nodeMinor(t *testing.T, tree *fakehost.Tree, node string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(tree.Path(node), &st); err != nil {
		require.ErrorIs(t, err, unix.ENOENT)
		return -1
	}
	require.Equal(t, uint32(unix.S_IFCHR), st.Mode&unix.S_IFMT, "%s is a char device", node)
	return int(unix.Minor(st.Rdev))
}

func exists(tree *fakehost.Tree, p string) bool {
	_, err := os.Lstat(tree.Path(p))
	return err == nil
}

// mounted lists the mount points under dir in this process's mountinfo.
func mounted(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// TestSRIOVP800 lays out p800-sriov's second card (driver 5.x, minor =
// index) 0 -> 2 -> 0 -> 4, with the refusals in between, and re-lays out
// the first card, checking sysfs, the nodes and discovery at each step.
func TestSRIOVP800(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.P800SRIOV())
	k := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{UdevDelay: 300 * time.Millisecond})
	const pf = "0000:83:00.0"
	pfDir := "/sys/devices/pci0000:80/0000:80:02.0/" + pf
	require.Equal(t, []string{"0000:03:00.0", pf}, k.PFs())
	require.Len(t, mounted(t, tree.Root), 2)
	require.Equal(t, "0\n", readNumVFs(t, tree, pf))
	require.Equal(t, "2\n", readNumVFs(t, tree, "0000:03:00.0"))
	before := []string{
		"xpu0 0000:03:00.0 P800 98304 -2 0",
		"xpu1 0000:03:00.1 P800 VF 49152 2 1",
		"xpu2 0000:03:00.2 P800 VF 49152 2 2",
		"xpu3 0000:83:00.0 P800 98304 0 3",
	}
	require.Equal(t, before, devices(t, tree))

	// 0 -> 2: sysfs at once, the nodes when udev gets to them.
	require.NoError(t, writeNumVFs(tree, pf, "2"))
	require.Equal(t, "2\n", readNumVFs(t, tree, pf))
	require.Equal(t, 2, k.NumVFs(pf))
	for i, vf := range []string{"0000:83:00.1", "0000:83:00.2"} {
		target, err := os.Readlink(tree.Path(fmt.Sprintf("%s/virtfn%d", pfDir, i)))
		require.NoError(t, err)
		require.Equal(t, "../"+vf, target)
		target, err = os.Readlink(tree.Path("/sys/devices/pci0000:80/0000:80:02.0/" + vf + "/physfn"))
		require.NoError(t, err)
		require.Equal(t, "../"+pf, target)
		require.True(t, exists(tree, "/sys/bus/pci/devices/"+vf))
	}
	require.True(t, exists(tree, "/sys/dev/char/195:4"))
	require.Equal(t, -1, nodeMinor(t, tree, "/dev/xpu4"), "udev has not run yet")
	require.NoError(t, k.Settle(5*time.Second))
	require.Equal(t, 4, nodeMinor(t, tree, "/dev/xpu4"))
	require.Equal(t, 5, nodeMinor(t, tree, "/dev/xpu5"))
	halves := append(append([]string(nil), before[:3]...),
		"xpu3 0000:83:00.0 P800 98304 -2 3",
		"xpu4 0000:83:00.1 P800 VF 49152 2 4",
		"xpu5 0000:83:00.2 P800 VF 49152 2 5")
	require.Equal(t, halves, devices(t, tree))

	// What the kernel refuses changes nothing.
	for _, tc := range []struct {
		value string
		want  syscall.Errno
	}{{"4", syscall.EBUSY}, {"5", syscall.ERANGE}, {"two", syscall.EINVAL}, {" 2", syscall.EINVAL}, {"-1", syscall.EINVAL}} {
		require.ErrorIs(t, writeNumVFs(tree, pf, tc.value), tc.want, tc.value)
	}
	require.NoError(t, writeNumVFs(tree, pf, "2"), "the current count is a no-op")
	require.NoError(t, k.Settle(5*time.Second))
	require.Equal(t, halves, devices(t, tree))

	// Another process is refused as this one: bash's echo (dash says "I/O error" for any failed write).
	out, err := exec.Command("bash", "-c", `echo 4 > "$1"`, "bash", numvfs(tree, pf)).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "busy")

	// 2 -> 0 from a shell: all of it goes.
	out, err = exec.Command("bash", "-c", `echo 0 > "$1"`, "bash", numvfs(tree, pf)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.False(t, exists(tree, pfDir+"/virtfn0"))
	require.False(t, exists(tree, "/sys/devices/pci0000:80/0000:80:02.0/0000:83:00.1"))
	require.False(t, exists(tree, "/sys/bus/pci/devices/0000:83:00.1"))
	require.False(t, exists(tree, "/sys/bus/pci/drivers/kunlun/0000:83:00.1"))
	require.False(t, exists(tree, "/sys/class/kunlun/xpu4"))
	require.False(t, exists(tree, "/sys/dev/char/195:4"))
	require.False(t, exists(tree, "/proc/kunlun/dev4"))
	require.NoError(t, k.Settle(5*time.Second))
	require.Equal(t, -1, nodeMinor(t, tree, "/dev/xpu4"))
	require.Equal(t, before, devices(t, tree))

	// 0 -> 4: quarters, on the lowest free indexes again.
	require.NoError(t, writeNumVFs(tree, pf, "4"))
	require.NoError(t, k.Settle(5*time.Second))
	quarters := append(append([]string(nil), before[:3]...), "xpu3 0000:83:00.0 P800 98304 -4 3")
	for i := range 4 {
		quarters = append(quarters, fmt.Sprintf("xpu%d 0000:83:00.%d P800 VF 24576 4 %d", 4+i, 1+i, 4+i))
	}
	require.Equal(t, quarters, devices(t, tree))

	// The first card, 2 -> 0 -> 4: its VFs' indexes 1 and 2 come back,
	// then the next free ones after the second card's.
	require.NoError(t, writeNumVFs(tree, "0000:03:00.0", "0"))
	require.NoError(t, writeNumVFs(tree, "0000:03:00.0", "4"))
	require.NoError(t, k.Settle(5*time.Second))
	got := devices(t, tree)
	require.Equal(t, append([]string{
		"xpu0 0000:03:00.0 P800 98304 -4 0",
		"xpu1 0000:03:00.1 P800 VF 24576 4 1",
		"xpu2 0000:03:00.2 P800 VF 24576 4 2",
	}, append(quarters[3:], "xpu8 0000:03:00.3 P800 VF 24576 4 8", "xpu9 0000:03:00.4 P800 VF 24576 4 9")...), got)
	require.Equal(t, 9, nodeMinor(t, tree, "/dev/xpu9"))

	var log []string
	for _, w := range k.Writes() {
		log = append(log, fmt.Sprintf("%s=%s:%d", w.PF, w.Value, w.Errno))
	}
	require.Equal(t, []string{
		pf + "=2:0", pf + "=4:16", pf + "=5:34", pf + "=two:22", pf + "= 2:22", pf + "=-1:22", pf + "=2:0",
		pf + "=4:16", pf + "=0:0", pf + "=4:0", "0000:03:00.0=0:0", "0000:03:00.0=4:0",
	}, log)

	// Close: no mount left, the tree as the kernel left it.
	require.NoError(t, k.Close())
	require.NoError(t, k.Close(), "idempotent")
	require.Empty(t, mounted(t, tree.Root))
	st, err := os.Lstat(numvfs(tree, pf))
	require.NoError(t, err)
	require.True(t, st.Mode().IsRegular())
	require.Equal(t, "4\n", readNumVFs(t, tree, pf))
	require.Equal(t, got, devices(t, tree))
}

// TestSRIOVR200 is the driver 4.x host: the xpu class, /proc/xpu/devN and
// minors 2*slot; R200 allows at most 3 VFs.
func TestSRIOVR200(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.R200SRIOV())
	// The state on another file system where there is one (/dev/shm is
	// tmpfs): the PFs' content is copied there and back.
	state := t.TempDir()
	if dir, err := os.MkdirTemp("/dev/shm", "xpu-fake-sriov-test-"); err == nil {
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		state = dir
	}
	k := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{UdevDelay: -1, StateDir: state})
	const pf = "0000:5e:00.0"
	require.ErrorIs(t, writeNumVFs(tree, pf, "4"), syscall.ERANGE)
	require.NoError(t, writeNumVFs(tree, pf, "0x2"), "kstrtou16 takes hex")
	require.NoError(t, k.Settle(5*time.Second))
	for i, idx := range []int{5, 6} {
		vf := fmt.Sprintf("0000:5e:00.%d", 1+i)
		require.Equal(t, 2*idx, nodeMinor(t, tree, fmt.Sprintf("/dev/xpu%d", idx)))
		info, err := os.ReadFile(tree.Path(fmt.Sprintf("/proc/xpu/dev%d/info", idx)))
		require.NoError(t, err)
		require.Contains(t, string(info), "DeviceAddr:\t"+vf+"\n")
		mm, err := os.ReadFile(tree.Path(fmt.Sprintf("/proc/xpu/dev%d/mminfo", idx)))
		require.NoError(t, err)
		require.Contains(t, string(mm), "MAIN: 0 / 8192 MB")
		target, err := os.Readlink(tree.Path(fmt.Sprintf("/sys/class/xpu/xpu%d", idx)))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("../../devices/pci0000:00/%s/xpu/xpu%d", vf, idx), target)
		dev, err := os.ReadFile(tree.Path(fmt.Sprintf("/sys/class/xpu/xpu%d/dev", idx)))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("243:%d\n", 2*idx), string(dev))
	}
	got := devices(t, tree)
	require.Equal(t, []string{
		"xpu0 0000:3b:00.0 R200 16384 -3 0",
		"xpu1 0000:5e:00.0 R200 16384 -2 2",
		"xpu2 0000:3b:00.1 R200 VF 5120 3 4",
		"xpu3 0000:3b:00.2 R200 VF 5120 3 6",
		"xpu4 0000:3b:00.3 R200 VF 5120 3 8",
		"xpu5 0000:5e:00.1 R200 VF 8192 2 10",
		"xpu6 0000:5e:00.2 R200 VF 8192 2 12",
	}, got)

	require.NoError(t, writeNumVFs(tree, pf, "0"))
	require.False(t, exists(tree, "/proc/xpu/dev5"))
	require.False(t, exists(tree, "/sys/class/xpu/xpu5"))
	require.NoError(t, k.Settle(5*time.Second))
	require.Equal(t, -1, nodeMinor(t, tree, "/dev/xpu5"))
	require.Len(t, devices(t, tree), 5)
	h := k.Host()
	require.Len(t, h.Devices, 5)

	require.NoError(t, k.Close())
	require.Empty(t, mounted(t, tree.Root))
	pfDir := tree.Path("/sys/devices/pci0000:00/" + pf)
	st, err := os.Lstat(filepath.Join(pfDir, "sriov_numvfs"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode(), "Build's mode back (the kernel's, 0644)")
	target, err := os.Readlink(filepath.Join(pfDir, "driver"))
	require.NoError(t, err)
	require.Equal(t, "../../../bus/pci/drivers/kunlun", target)
	require.Equal(t, "3\n", readFile(t, filepath.Join(pfDir, "sriov_totalvfs")))
	require.Equal(t, "243:2\n", readFile(t, filepath.Join(pfDir, "xpu/xpu1/dev")))
	require.Len(t, devices(t, tree), 5)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestSRIOVFaults: the injected failures, each used once.
func TestSRIOVFaults(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.P800Quarters())
	k := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{UdevDelay: 20 * time.Millisecond, SlowUdevDelay: 800 * time.Millisecond})
	const pf = "0000:83:00.0"

	k.FailNext(pf, fakehost.FaultWriteError)
	require.ErrorIs(t, writeNumVFs(tree, pf, "2"), syscall.EIO)
	require.Equal(t, 0, k.NumVFs(pf))
	require.False(t, exists(tree, "/sys/devices/pci0000:80/0000:80:02.0/"+pf+"/virtfn0"))

	// No nodes: the fault waits for a write that enables VFs.
	k.FailNext(pf, fakehost.FaultNoNodes)
	require.NoError(t, writeNumVFs(tree, pf, "0"))
	require.NoError(t, writeNumVFs(tree, pf, "2"))
	require.NoError(t, k.Settle(5*time.Second))
	time.Sleep(100 * time.Millisecond)
	require.True(t, exists(tree, "/sys/bus/pci/devices/0000:83:00.1/physfn"))
	require.Equal(t, -1, nodeMinor(t, tree, "/dev/xpu6"))
	require.Equal(t, -1, nodeMinor(t, tree, "/dev/xpu7"))

	// Slow udev, then all is well again.
	k.FailNext(pf, fakehost.FaultSlowUdev)
	require.NoError(t, writeNumVFs(tree, pf, "0"))
	require.NoError(t, writeNumVFs(tree, pf, "2"))
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, -1, nodeMinor(t, tree, "/dev/xpu6"), "udev is slow")
	require.NoError(t, k.Settle(5*time.Second))
	require.Equal(t, 6, nodeMinor(t, tree, "/dev/xpu6"))
	require.Equal(t, 7, nodeMinor(t, tree, "/dev/xpu7"))

	// The enabling write fails, the disabling one before it does not;
	// the previous count goes back in.
	k.FailNext(pf, fakehost.FaultEnableError)
	require.NoError(t, writeNumVFs(tree, pf, "0"))
	require.ErrorIs(t, writeNumVFs(tree, pf, "4"), syscall.EIO)
	require.Equal(t, 0, k.NumVFs(pf))
	require.False(t, exists(tree, "/sys/bus/pci/devices/0000:83:00.1"))
	require.NoError(t, writeNumVFs(tree, pf, "2"))
	require.Equal(t, 2, k.NumVFs(pf))

	var errnos []syscall.Errno
	for _, w := range k.Writes() {
		errnos = append(errnos, w.Errno)
	}
	require.Equal(t, []syscall.Errno{syscall.EIO, 0, 0, 0, 0, 0, syscall.EIO, 0}, errnos)
}

// TestSRIOVOnlyRootWrites: sriov_numvfs is 0644 root:root; another user's
// write is refused at open (the caller's fsuid is what FUSE reports).
func TestSRIOVOnlyRootWrites(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.P800SRIOV())
	k := fakehosttest.StartSRIOV(t, tree, fakehost.SRIOVOptions{})
	const pf = "0000:83:00.0"
	st, err := os.Stat(numvfs(tree, pf))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	dir, err := unix.Open(filepath.Dir(numvfs(tree, pf)), unix.O_PATH|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer unix.Close(dir)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread with the changed fsuid ends with the goroutine
		if err := unix.Setfsuid(65534); err != nil {
			errc <- err
			return
		}
		fd, err := unix.Openat(dir, "sriov_numvfs", unix.O_WRONLY, 0)
		if err == nil {
			_ = unix.Close(fd)
		}
		errc <- err
	}()
	require.ErrorIs(t, <-errc, unix.EACCES)
	require.Empty(t, k.Writes())
	require.NoError(t, writeNumVFs(tree, pf, "2"), "root may")
}

func TestFakeOpenFD(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.P800SRIOV(), fakehost.WithoutMknod())
	require.NoError(t, fakehost.FakeOpenFD(tree.Root, 4242, 7, "/dev/xpu1"))
	require.NoError(t, fakehost.FakeOpenFD(tree.Root, 4242, 9, "/dev/xpu2"))
	fd := filepath.Join(tree.Root, "proc/4242/fd/7")
	target, err := os.Readlink(fd)
	require.NoError(t, err)
	require.Equal(t, tree.Path("/dev/xpu1"), target)
	via, err := os.Stat(fd)
	require.NoError(t, err)
	node, err := os.Stat(tree.Path("/dev/xpu1"))
	require.NoError(t, err)
	require.True(t, os.SameFile(via, node), "stat through the link is the node")
	comm, err := os.ReadFile(filepath.Join(tree.Root, "proc/4242/comm"))
	require.NoError(t, err)
	require.Equal(t, "python3\n", string(comm))
	entries, err := os.ReadDir(filepath.Join(tree.Root, "proc/4242/fd"))
	require.NoError(t, err)
	require.Len(t, entries, 2)

	require.ErrorContains(t, fakehost.FakeOpenFD(tree.Root, 4242, 1, "/dev/xpu99"), "xpu99")
	require.ErrorContains(t, fakehost.FakeOpenFD(tree.Root, 4242, 1, "/etc/passwd"), "under /dev")
	require.ErrorContains(t, fakehost.FakeOpenFD(tree.Root, 4242, 1, "/dev/../etc/passwd"), "under /dev")
	require.ErrorContains(t, fakehost.FakeOpenFD(tree.Root, 0, 1, "/dev/xpu1"), "pid")

	require.NoError(t, fakehost.RemoveFakeProcess(tree.Root, 4242))
	require.NoFileExists(t, filepath.Join(tree.Root, "proc/4242/comm"))
	require.NoError(t, fakehost.RemoveFakeProcess(tree.Root, 4242), "gone already")
	require.True(t, exists(tree, "/proc/kunlun/dev1/dma_excp_mask"), "the rest of /proc stays")
}

// crashRootEnv makes TestSRIOVCrashedChild start a kernel on the tree it
// names and die without closing it.
const crashRootEnv = "XPU_FAKEHOST_TEST_CRASH_ROOT"

// TestSRIOVCrash: a test binary killed with its kernel running leaves dead
// mounts; the next StartSRIOV detaches them, so the tree can be removed.
func TestSRIOVCrash(t *testing.T) {
	crashed := fakehosttest.Build(t, fakehost.P800SRIOV())
	fakehosttest.StartSRIOV(t, fakehosttest.Build(t, fakehost.P800SRIOV()), fakehost.SRIOVOptions{}) // FUSE is here
	cmd := exec.Command(os.Args[0], "-test.run=^TestSRIOVCrashedChild$")
	cmd.Env = append(os.Environ(), crashRootEnv+"="+crashed.Root)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, "signal: killed", exit.String(), "%s", out)
	dead := mounted(t, crashed.Root)
	require.Len(t, dead, 2, "%s", out)
	_, err = os.Stat(dead[0])
	require.ErrorIs(t, err, syscall.ENOTCONN)

	other := fakehosttest.Build(t, fakehost.R200SRIOV())
	fakehosttest.StartSRIOV(t, other, fakehost.SRIOVOptions{})
	require.Empty(t, mounted(t, crashed.Root), "detached")
	require.NoError(t, os.RemoveAll(crashed.Root))
	require.Len(t, mounted(t, other.Root), 2, "a live kernel's mounts stay")
}

// TestSRIOVCrashedChild is TestSRIOVCrash's child process; it does nothing
// in a test run of its own.
func TestSRIOVCrashedChild(t *testing.T) {
	root := os.Getenv(crashRootEnv)
	if root == "" {
		return
	}
	if _, err := fakehost.StartSRIOV(root, fakehost.P800SRIOV(), fakehost.SRIOVOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// TestSRIOVStartFails: a host without SR-IOV or a tree that is not the
// host's is refused, and a failure on the second PF puts the first back.
func TestSRIOVStartFails(t *testing.T) {
	plain := fakehosttest.Build(t, fakehost.P800x8(), fakehost.WithoutMknod())
	_, err := fakehost.StartSRIOV(plain.Root, plain.Host, fakehost.SRIOVOptions{})
	require.ErrorContains(t, err, "no PF with SR-IOV")

	quarters := fakehosttest.Build(t, fakehost.P800Quarters(), fakehost.WithoutMknod())
	_, err = fakehost.StartSRIOV(quarters.Root, fakehost.P800SRIOV(), fakehost.SRIOVOptions{})
	require.ErrorContains(t, err, `sriov_numvfs reads "4\n", but the host has 2 VFs`)
	require.Equal(t, "4\n", readNumVFs(t, quarters, "0000:03:00.0"), "nothing moved")

	// A sriov_numvfs that is no regular file is refused with fdio's sentinel.
	dir := fakehosttest.Build(t, fakehost.P800SRIOV(), fakehost.WithoutMknod())
	require.NoError(t, os.Remove(numvfs(dir, "0000:03:00.0")))
	require.NoError(t, os.Mkdir(numvfs(dir, "0000:03:00.0"), 0o755))
	_, err = fakehost.StartSRIOV(dir.Root, dir.Host, fakehost.SRIOVOptions{})
	require.ErrorIs(t, err, fdio.ErrNotRegular)
	require.ErrorContains(t, err, "PF 0000:03:00.0: no sriov_numvfs file")

	testreq.FUSE(t, "the fake SR-IOV kernel")
	tree := fakehosttest.Build(t, fakehost.P800SRIOV())
	require.NoError(t, os.Remove(numvfs(tree, "0000:83:00.0")))
	_, err = fakehost.StartSRIOV(tree.Root, tree.Host, fakehost.SRIOVOptions{Log: t.Logf})
	require.ErrorContains(t, err, "PF 0000:83:00.0: no sriov_numvfs file")
	require.Empty(t, mounted(t, tree.Root))
	st, err := os.Lstat(numvfs(tree, "0000:03:00.0"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode(), "the first PF's directory is back, sriov_numvfs with the mode Build gave it")
	entries, err := os.ReadDir(filepath.Dir(tree.Root))
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), ".xpu-fake-sriov-"), "state directory %s left", e.Name())
	}
}
