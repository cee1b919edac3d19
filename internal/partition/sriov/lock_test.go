package sriov

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// nobody is the ordinary user of the tests that run as root.
const nobody = 65534

// flockAsNobody starts `flock PATH sleep 60` as uid 65534 (the attack:
// any local user holding the lock) and returns once the child holds it;
// the child is killed when the test ends.
func flockAsNobody(t *testing.T, path string) {
	t.Helper()
	cmd := exec.Command(testreq.Tool(t, "flock"), "-n", path, "sh", "-c", "echo held; exec sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 5)
	n, _ := out.Read(buf)
	require.Equal(t, "held\n", string(buf[:n]), "uid %d holds a flock on %s", nobody, path)
}

// openAsNobody reports whether uid 65534 can open path (flock -n PATH
// true).
func openAsNobody(t *testing.T, path string) error {
	t.Helper()
	cmd := exec.Command(testreq.Tool(t, "flock"), "-n", path, "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd.Run()
}

// searchable lets other users reach the tree (a test's temporary
// directories are 0700).
func searchable(t *testing.T, root string) {
	t.Helper()
	for _, d := range []string{root, filepath.Dir(root), filepath.Dir(filepath.Dir(root))} {
		st, err := os.Stat(d)
		require.NoError(t, err)
		require.NoError(t, os.Chmod(d, st.Mode().Perm()|0o055))
	}
}

// The layout lock is one no other user can hold: a flock on the old lock
// object (the dev root's /sys/bus/pci/devices, 0755 on every host) or on
// the new one's directory does not keep an apply from laying the node
// out. As root, the holder is uid 65534, which cannot even open the new
// lock; as another user, the holder is another open file of the test.
func TestLockOthersCannotHold(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	lock, err := LockLayout(context.Background(), tr.Root, time.Second)
	require.NoError(t, err)
	require.Equal(t, tr.Path("/run/xpu-cdi/partition.lock"), lock.Path())
	lock.Unlock()

	oldObject, lockDir := tr.Path("/sys/bus/pci/devices"), tr.Path(partition.LockDir)
	if os.Geteuid() == 0 {
		searchable(t, tr.Root)
		flockAsNobody(t, oldObject)
		require.Error(t, openAsNobody(t, lockDir), "uid %d cannot open %s", nobody, lockDir)
		require.Error(t, openAsNobody(t, LockPath(tr.Root)), "uid %d cannot open the lock", nobody)
	} else {
		for _, p := range []string{oldObject, lockDir} {
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			require.NoError(t, err)
			t.Cleanup(func() { _ = unix.Close(fd) })
			require.NoError(t, unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB), p)
		}
	}
	st, err := os.Stat(lockDir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	require.NoError(t, os.Chmod(fakehosttest.NumVFsPath(t, tr, "0000:83:00.0"), 0o644))
	c := config(tr)
	c.Settle = 100 * time.Millisecond
	var reached []string
	c.hooks = &applyHooks{beforeCard: func(addr string) { reached = append(reached, addr) }}
	l, _ := partition.ParseLayout("3=2")
	rep, err := Apply(context.Background(), c, l)
	require.NotErrorIs(t, err, ErrLocked)
	require.Equal(t, []string{"0000:83:00.0"}, reached, "the apply got past the lock")
	require.Equal(t, []int{2, 0}, rep.Cards[1].Writes, "written (the plain tree has no kernel to follow: put back)")
}

// A layout that changes nothing takes no lock and returns at once, even
// while another holds the lock: the installer's passes and the boot unit
// do not wait. A dry run takes no lock either.
func TestApplyNoOpTakesNoLock(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	lock, err := LockLayout(context.Background(), tr.Root, time.Second)
	require.NoError(t, err)
	defer lock.Unlock()
	c := config(tr)
	c.Settle = 5 * time.Second
	start := time.Now()
	rep, err := Apply(context.Background(), c, partition.Layout{{Selector: "0", VFs: 2}})
	require.NoError(t, err)
	require.False(t, rep.Changed())
	require.Less(t, time.Since(start), time.Second)

	c.DryRun = true
	start = time.Now()
	rep, err = Apply(context.Background(), c, partition.Layout{{Selector: "3", VFs: 2}})
	require.NoError(t, err)
	require.True(t, rep.Changed())
	require.Less(t, time.Since(start), time.Second)
}

// Apply plans again under the lock: a layout another apply made between
// the first plan and the lock is seen, and nothing is written.
func TestApplyPlansAgainUnderTheLock(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	p3 := fakehosttest.NumVFsPath(t, tr, "0000:83:00.0")
	require.NoError(t, os.Chmod(p3, 0o644))
	c := config(tr)
	c.hooks = &applyHooks{
		beforeLock: func() { require.NoError(t, os.WriteFile(p3, []byte("2\n"), 0o644)) },
		beforeCard: func(addr string) { t.Errorf("%s written", addr) },
	}
	l, _ := partition.ParseLayout("3=2")
	rep, err := Apply(context.Background(), c, l)
	require.NoError(t, err)
	require.False(t, rep.Changed(), "the card has its count now")
	require.Empty(t, rep.Cards[1].Writes)

	// A layout that became impossible meanwhile is refused, unwritten.
	tr = build(t, fakehosttest.P800SRIOVBoth())
	total := filepath.Join(filepath.Dir(fakehosttest.NumVFsPath(t, tr, "0000:83:00.0")), "sriov_totalvfs")
	require.NoError(t, os.Chmod(total, 0o644))
	c = config(tr)
	c.hooks = &applyHooks{beforeLock: func() { require.NoError(t, os.WriteFile(total, []byte("0\n"), 0o644)) }}
	before := fakehosttest.Snapshot(t, tr)
	_, err = Apply(context.Background(), c, l)
	require.ErrorContains(t, err, "the card has no SR-IOV")
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))
}

// Waiting for the lock ends at the caller's bound (ErrLocked) or with its
// context.
func TestLockWait(t *testing.T) {
	root := t.TempDir()
	lock, err := LockLayout(context.Background(), root, time.Second)
	require.NoError(t, err)
	start := time.Now()
	_, err = LockLayout(context.Background(), root, 300*time.Millisecond)
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorContains(t, err, LockPath(root))
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err = LockLayout(ctx, root, time.Minute)
	require.ErrorIs(t, err, context.Canceled)

	go func() { time.Sleep(200 * time.Millisecond); lock.Unlock() }()
	again, err := LockLayout(context.Background(), root, 5*time.Second)
	require.NoError(t, err)
	again.Unlock()
	again.Unlock()
}

// A lock path another user could open, or that leads elsewhere, is
// refused, naming it, and nothing outside is touched. Created, the
// directory is 0700 and the file 0600 whatever the umask.
func TestLockRefusesUnsafePaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, root string)
		want  string
	}{
		{"lock directory open to others", func(t *testing.T, root string) {
			require.NoError(t, os.MkdirAll(root+partition.LockDir, 0o700))
			require.NoError(t, os.Chmod(root+partition.LockDir, 0o755))
		}, "/run/xpu-cdi is mode 0755, open to other users"},
		{"lock directory a link", func(t *testing.T, root string) {
			require.NoError(t, os.MkdirAll(root+"/run", 0o755))
			require.NoError(t, os.Symlink(t.TempDir(), root+partition.LockDir))
		}, "/run/xpu-cdi is not a directory (a link is not followed)"},
		{"run a link", func(t *testing.T, root string) {
			require.NoError(t, os.Symlink(t.TempDir(), root+"/run"))
		}, "/run is not a directory (a link is not followed)"},
		{"run writable by others", func(t *testing.T, root string) {
			require.NoError(t, os.Mkdir(root+"/run", 0o755))
			require.NoError(t, unix.Chmod(root+"/run", 0o1777))
		}, "/run is mode 1777: another user may replace xpu-cdi in it"},
		{"lock file readable by others", func(t *testing.T, root string) {
			require.NoError(t, os.MkdirAll(root+partition.LockDir, 0o700))
			require.NoError(t, os.WriteFile(LockPath(root), nil, 0o644))
			require.NoError(t, os.Chmod(LockPath(root), 0o644))
		}, partition.LockDir + "/partition.lock is mode 0644, open to other users"},
		{"lock file a FIFO", func(t *testing.T, root string) {
			require.NoError(t, os.MkdirAll(root+partition.LockDir, 0o700))
			require.NoError(t, unix.Mkfifo(LockPath(root), 0o600))
		}, partition.LockDir + "/partition.lock is not a regular file"},
		{"lock file a hard link", func(t *testing.T, root string) {
			require.NoError(t, os.MkdirAll(root+partition.LockDir, 0o700))
			require.NoError(t, os.WriteFile(root+partition.LockDir+"/other", nil, 0o600))
			require.NoError(t, os.Link(root+partition.LockDir+"/other", LockPath(root)))
		}, partition.LockDir + "/partition.lock has 2 links"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.setup(t, root)
			_, err := LockLayout(context.Background(), root, time.Second)
			require.ErrorIs(t, err, partition.ErrUnsafeLock)
			require.ErrorContains(t, err, root+tc.want)
		})
	}

	t.Run("lock file a link", func(t *testing.T) {
		root, outside := t.TempDir(), filepath.Join(t.TempDir(), "target")
		require.NoError(t, os.MkdirAll(root+partition.LockDir, 0o700))
		require.NoError(t, os.Symlink(outside, LockPath(root)))
		_, err := LockLayout(context.Background(), root, time.Second)
		require.ErrorContains(t, err, LockPath(root))
		require.NoFileExists(t, outside, "a planted link is not followed")
	})

	t.Run("another user's directory", func(t *testing.T) {
		testreq.Root(t, "chown to another user")
		root := t.TempDir()
		require.NoError(t, os.MkdirAll(root+partition.LockDir, 0o700))
		require.NoError(t, os.Chown(root+partition.LockDir, nobody, nobody))
		_, err := LockLayout(context.Background(), root, time.Second)
		require.ErrorIs(t, err, partition.ErrUnsafeLock)
		require.ErrorContains(t, err, root+"/run/xpu-cdi is owned by uid 65534")
	})

	t.Run("created private whatever the umask", func(t *testing.T) {
		root := t.TempDir()
		old := unix.Umask(0o277)
		lock, err := LockLayout(context.Background(), root, time.Second)
		unix.Umask(old)
		require.NoError(t, err)
		defer lock.Unlock()
		for p, mode := range map[string]os.FileMode{root + "/run": 0o755, root + partition.LockDir: 0o700} {
			st, err := os.Stat(p)
			require.NoError(t, err)
			require.Equal(t, mode, st.Mode().Perm(), p)
		}
		st, err := os.Stat(LockPath(root))
		require.NoError(t, err)
		require.Zero(t, st.Mode().Perm()&0o077)
	})
}

// A card opened between the check of its holders and its first write
// (here: right before the write, through the apply loop's seam) is
// refused, naming the holder; nothing is written to it.
func TestApplyRechecksCards(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	before := fakehosttest.Snapshot(t, tr)
	c := config(tr)
	c.hooks = &applyHooks{beforeCard: func(addr string) {
		if addr == "0000:83:00.0" {
			fakehosttest.HoldOpen(t, tr, 4300, 5, "python3", "/dev/xpu3")
		}
	}}
	l, _ := partition.ParseLayout("3=2")
	rep, err := Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "card 3 (0000:83:00.0): card in use: opened during the apply by pid 4300 (python3) holding /dev/xpu3, not written")
	require.Empty(t, rep.Cards[1].Writes)
	require.Equal(t, 0, rep.Cards[1].After)
	require.True(t, rep.Cards[1].Held)
	require.NotEmpty(t, rep.Cards[1].Error)
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))

	// A pod given the card meanwhile (PodResources), likewise.
	tr = build(t, fakehosttest.P800SRIOVBoth())
	before = fakehosttest.Snapshot(t, tr)
	srv := podresourcestest.NewServer(nil)
	c = config(tr)
	c.PodResourcesSocket = podresourcestest.Serve(t, srv)
	c.hooks = &applyHooks{beforeCard: func(string) {
		srv.Set(&podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
			podresourcestest.DevicePluginPod("ml", "late", "app", "baidu.com/xpu", "3"),
		}})
	}}
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "opened during the apply by pod ml/late container app holding /dev/xpu3")
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))
}

// RequirePodResources: a missing socket is an error, not "no pods"
// (where a kubelet always runs); without it, a note.
func TestRequirePodResources(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	before := fakehosttest.Snapshot(t, tr)
	c := config(tr)
	c.PodResourcesSocket = filepath.Join(t.TempDir(), "kubelet.sock")
	l, _ := partition.ParseLayout("3=2")

	c.DryRun = true
	rep, err := Apply(context.Background(), c, l)
	require.NoError(t, err)
	require.Len(t, rep.Notes, 1)
	require.Contains(t, rep.Notes[0], "no kubelet PodResources socket at "+c.PodResourcesSocket)

	c.DryRun, c.RequirePodResources = false, true
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, partition.ErrNoPodResources)
	require.ErrorContains(t, err, c.PodResourcesSocket)
	require.Equal(t, before, fakehosttest.Snapshot(t, tr))
	_, err = partition.Show(context.Background(), c.Config)
	require.ErrorIs(t, err, partition.ErrNoPodResources)
}
