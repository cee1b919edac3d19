package fakehost

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// mountLoopback serves p's backing directory on its mount point: every
// file is the backing file, but for sriov_numvfs, whose reads and writes
// are the kernel's. Lookups and attributes are never cached, so a new
// virtfnK link shows at once.
func mountLoopback(k *SRIOVKernel, p *sriovPF) (unmounter, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p.backing, &st); err != nil {
		return nil, err
	}
	lr := &fs.LoopbackRoot{Path: p.backing, Dev: uint64(st.Dev)}
	root := &fs.LoopbackNode{RootData: lr}
	lr.RootNode = root
	// NewNode, not its replacement NodeWrapChilder, whose WrapChild is not
	// told the child's name: only sriov_numvfs, by name, is the kernel's.
	lr.NewNode = func(r *fs.LoopbackRoot, parent *fs.Inode, name string, _ *syscall.Stat_t) fs.InodeEmbedder { //nolint:staticcheck // SA1019: see above
		if parent == root.EmbeddedInode() && name == "sriov_numvfs" {
			return &numvfsNode{LoopbackNode: fs.LoopbackNode{RootData: r}, k: k, pf: p}
		}
		return &fs.LoopbackNode{RootData: r}
	}
	zero := time.Duration(0)
	return fs.Mount(p.mount, root, &fs.Options{
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMount: true, DirectMountStrict: true, AllowOther: true,
			FsName: SRIOVFSName, Name: SRIOVFSName,
		},
	})
}

// numvfsNode is a PF's sriov_numvfs.
type numvfsNode struct {
	fs.LoopbackNode
	k  *SRIOVKernel
	pf *sriovPF
}

var (
	_ fs.NodeOpener    = (*numvfsNode)(nil)
	_ fs.NodeSetattrer = (*numvfsNode)(nil)
	_ fs.FileReader    = (*numvfsHandle)(nil)
	_ fs.FileWriter    = (*numvfsHandle)(nil)
)

// Open gives a handle whose reads and writes go to the kernel, uncached;
// only root may write (the attribute is 0644 root:root).
func (n *numvfsNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 {
		if c, ok := fuse.FromContext(ctx); ok && c.Uid != 0 {
			return nil, 0, syscall.EACCES
		}
	}
	return &numvfsHandle{k: n.k, pf: n.pf}, fuse.FOPEN_DIRECT_IO, 0
}

// Setattr ignores truncation (a shell's > opens with O_TRUNC), as sysfs
// does; the rest is the backing file's.
func (n *numvfsNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	in.Valid &^= fuse.FATTR_SIZE
	return n.LoopbackNode.Setattr(ctx, nil, in, out)
}

type numvfsHandle struct {
	k  *SRIOVKernel
	pf *sriovPF
}

// Read gives the current count, as sriov_numvfs_show.
func (h *numvfsHandle) Read(_ context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	text := strconv.Itoa(h.k.NumVFs(h.pf.bdf)) + "\n"
	if off >= int64(len(text)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(int(off)+len(dest), len(text))
	return fuse.ReadResultData([]byte(text[off:end])), 0
}

// Write is one store: the whole buffer, whatever the offset (sysfs).
func (h *numvfsHandle) Write(_ context.Context, data []byte, _ int64) (uint32, syscall.Errno) {
	if errno := h.k.write(h.pf, string(data)); errno != 0 {
		return 0, errno
	}
	return uint32(len(data)), 0
}

// detachMount lazily unmounts path.
func detachMount(path string) error { return unix.Unmount(path, unix.MNT_DETACH) }

// detachStaleMounts detaches this file system's mounts whose server is
// gone (stat fails with ENOTCONN): the leftovers of a process that died
// without Close, which would otherwise make removing their directories
// fail. Live mounts, a running test's, are left alone.
func detachStaleMounts(logf func(string, ...any)) {
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("fuse." + SRIOVFSName))
	if err != nil {
		return
	}
	for _, m := range mounts {
		var st unix.Stat_t
		if err := unix.Stat(m.Mountpoint, &st); errors.Is(err, unix.ENOTCONN) {
			if err := detachMount(m.Mountpoint); err == nil {
				logf("detached the stale mount %s (its server died)", m.Mountpoint)
			}
		}
	}
}
