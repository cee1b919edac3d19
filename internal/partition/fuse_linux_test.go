package partition

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// hungFile is a FUSE file whose server stops answering GETATTR once hang
// is set, as a hung FUSE (or NFS) server does, until release is closed.
type hungFile struct {
	fs.Inode
	hang    atomic.Bool
	release chan struct{}
}

var (
	_ fs.NodeGetattrer = (*hungFile)(nil)
	_ fs.NodeOpener    = (*hungFile)(nil)
)

func (f *hungFile) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if f.hang.Load() {
		select {
		case <-f.release:
		case <-ctx.Done():
		}
	}
	out.Mode = syscall.S_IFREG | 0o644
	return 0
}

func (f *hungFile) Open(context.Context, uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

type hungRoot struct {
	fs.Inode
	file *hungFile
}

func (r *hungRoot) OnAdd(ctx context.Context) {
	r.AddChild("held", r.NewPersistentInode(ctx, r.file, fs.StableAttr{Mode: syscall.S_IFREG}), false)
}

// Any process on the host (an unprivileged user with fusermount) holds a
// file of a FUSE mount whose server then stops answering: the in-use scan
// stats every descriptor of every process, and a plain stat(2) through
// /proc/PID/fd/N asks the server (GETATTR) and waits for it forever. The
// scan asks the kernel for what it has (statx AT_STATX_DONT_SYNC, and
// only the type and inode, so that NFS does not flush first) and returns.
func TestScanDoesNotHangOnAHungFUSEFile(t *testing.T) {
	testreq.FUSE(t, "a FUSE server that stops answering")
	mnt := t.TempDir()
	file := &hungFile{release: make(chan struct{})}
	zero := time.Duration(0)
	srv, err := fs.Mount(mnt, &hungRoot{file: file}, &fs.Options{
		AttrTimeout: &zero, EntryTimeout: &zero,
		MountOptions: fuse.MountOptions{DirectMount: true, DirectMountStrict: true, FsName: "xpu-cdi-hung", Name: "hung"},
	})
	require.NoError(t, err)
	var once sync.Once
	unblock := func() { once.Do(func() { close(file.release) }) }
	t.Cleanup(func() { unblock(); _ = srv.Unmount() })

	fd, err := unix.Open(filepath.Join(mnt, "held"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unblock(); _ = unix.Close(fd) })
	file.hang.Store(true)

	// The dev root's /proc: one process whose fd 9 is ours, through the
	// real magic link (a fake /proc link leading to /proc/PID/fd/N).
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc", "4242", "fd"), 0o755))
	require.NoError(t, os.Symlink("/proc/"+strconv.Itoa(os.Getpid())+"/fd/"+strconv.Itoa(fd), filepath.Join(root, "proc", "4242", "fd", "9")))
	keys := map[nodeKey]nodeOwner{{char: true, dev: unix.Mkdev(500, 0)}: {card: 0, node: "/dev/xpu0"}}

	done := make(chan error, 1)
	go func() {
		_, _, err := scanProcesses(context.Background(), root, keys)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		unblock()
		<-done
		t.Fatal("the in-use scan hung on a descriptor of a FUSE file whose server does not answer")
	}
}
