package fakehost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The fake SR-IOV kernel: StartSRIOV mounts, on the directory of every PF
// of a built tree that has SR-IOV (Device.TotalVFs > 0), a FUSE loopback of
// the directory's content whose sriov_numvfs answers as the kernel's
// sriov_numvfs_store and the kunlun driver do. See doc.go.

// DefaultUdevDelay is how long after a change udev takes, by default, to
// create or remove the VFs' /dev nodes.
const DefaultUdevDelay = 50 * time.Millisecond

// SRIOVFSName is the FUSE file system's name: mounts show as
// fuse.xpu-fake-sriov with source xpu-fake-sriov in /proc/self/mountinfo.
const SRIOVFSName = "xpu-fake-sriov"

// SRIOVOptions configures StartSRIOV.
type SRIOVOptions struct {
	// UdevDelay is how long after the sysfs change udev creates or removes
	// the VFs' /dev nodes: 0 means DefaultUdevDelay, a negative value at
	// once (still after the write returns).
	UdevDelay time.Duration
	// SlowUdevDelay replaces UdevDelay for a change hit by FaultSlowUdev;
	// 0 means 20 times UdevDelay, at least 1 s.
	SlowUdevDelay time.Duration
	// StateDir keeps the PFs' directory content while it is mounted, one
	// directory per PF; it should be outside the fake root and on its
	// file system (the content is renamed there, copied otherwise). Empty
	// means a new directory next to the root, removed by Close.
	StateDir string
	// Log, if set, gets a line per write and per udev event.
	Log func(format string, args ...any)
}

// Fault is a failure the fake kernel injects into a PF's next write
// (FailNext).
type Fault int

// Faults.
const (
	// FaultWriteError makes the next write to the PF fail with EIO and
	// change nothing, as a driver's failing sriov_configure does.
	FaultWriteError Fault = iota + 1
	// FaultNoNodes makes the next write that enables VFs succeed with the
	// VF functions in sysfs, but udev never creates their /dev nodes.
	FaultNoNodes
	// FaultSlowUdev delays the /dev nodes of the PF's next change (enable
	// or disable) by SRIOVOptions.SlowUdevDelay instead of UdevDelay;
	// udev handles events in order, so later events wait behind them.
	FaultSlowUdev
	// FaultEnableError makes the next write that would enable VFs fail
	// with EIO and change nothing (the driver's sriov_configure failing
	// to enable them), letting the writes of 0 before it through: the
	// second write of a 0-then-N re-layout fails.
	FaultEnableError
)

func (f Fault) String() string {
	switch f {
	case FaultWriteError:
		return "write-error"
	case FaultNoNodes:
		return "no-nodes"
	case FaultSlowUdev:
		return "slow-udev"
	case FaultEnableError:
		return "enable-error"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// SRIOVWrite is one write(2) to a PF's sriov_numvfs.
type SRIOVWrite struct {
	PF string `json:"pf"`
	// Value is what was written, without a trailing newline.
	Value string `json:"value"`
	// Errno is the error the write returned, 0 for success.
	Errno syscall.Errno `json:"errno"`
	At    time.Time     `json:"at"`
}

// SRIOVKernel is a running fake SR-IOV kernel (StartSRIOV).
type SRIOVKernel struct {
	root      string
	opts      SRIOVOptions
	stateDir  string
	ownState  bool
	realNodes bool

	mu     sync.Mutex
	host   Host
	pfs    map[string]*sriovPF
	order  []string // PF addresses, sorted
	writes []SRIOVWrite
	faults map[string][]Fault
	queue  []udevEvent
	closed bool

	wake      chan struct{}
	stop      chan struct{}
	udevDone  chan struct{}
	closeErr  error
	closeOnce sync.Once
}

// sriovPF is one PF the kernel serves.
type sriovPF struct {
	bdf     string
	dir     string // in-tree PCI function directory (the mount point)
	mount   string // its host path
	backing string // the host directory with its content
	mode    os.FileMode
	numMode os.FileMode // sriov_numvfs's mode as Build wrote it
	total   int
	num     int
	server  unmounter
}

// unmounter is the FUSE server of one mount (sriov_linux.go).
type unmounter interface{ Unmount() error }

// udevEvent is udev's work for one node: create it (add) or remove it.
type udevEvent struct {
	due   time.Time
	add   bool
	path  string // in-tree /dev/xpuN
	minor uint32
}

// StartSRIOV starts the fake SR-IOV kernel on the tree under root built
// from h (Build(root, h)): on every PF of h with TotalVFs > 0 and sysfs,
// the PF's directory is served by FUSE, and writes to its sriov_numvfs
// enable and disable VFs as the kernel and the driver do. It needs root
// and /dev/fuse. Close stops it and puts the directories back, with the
// VFs of the moment. Mounts of a kernel whose process died (a test binary
// killed by its -timeout) are detached first, so that their directories can
// be removed.
func StartSRIOV(root string, h Host, opts SRIOVOptions) (*SRIOVKernel, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fake SR-IOV kernel: %w", err)
	}
	if err := h.validate(); err != nil {
		return nil, fmt.Errorf("fake SR-IOV kernel: %w", err)
	}
	if h.NoSysfs {
		return nil, fmt.Errorf("fake SR-IOV kernel: the %s host under %s has no sysfs", h.Shape, abs)
	}
	switch {
	case opts.UdevDelay == 0:
		opts.UdevDelay = DefaultUdevDelay
	case opts.UdevDelay < 0:
		opts.UdevDelay = 0
	}
	if opts.SlowUdevDelay <= 0 {
		opts.SlowUdevDelay = max(20*opts.UdevDelay, time.Second)
	}
	k := &SRIOVKernel{
		root: abs, opts: opts, host: cloneHost(h), pfs: map[string]*sriovPF{}, faults: map[string][]Fault{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), udevDone: make(chan struct{}),
		realNodes: realNodesOf(abs, h),
	}
	detachStaleMounts(k.logf)
	var pfs []*sriovPF
	for _, d := range h.Devices {
		if d.Function != FunctionPF || d.TotalVFs <= 0 || d.NoSysfs {
			continue
		}
		if _, dup := k.pfs[d.BDF]; dup {
			continue
		}
		p := &sriovPF{bdf: d.BDF, dir: pciDir(d), total: d.TotalVFs, num: len(k.vfsOf(d.BDF))}
		p.mount = filepath.Join(abs, filepath.FromSlash(p.dir))
		k.pfs[d.BDF] = p
		k.order = append(k.order, d.BDF)
		pfs = append(pfs, p)
	}
	sort.Strings(k.order)
	if len(pfs) == 0 {
		return nil, fmt.Errorf("fake SR-IOV kernel: the %s host under %s has no PF with SR-IOV (Device.TotalVFs)", h.Shape, abs)
	}
	if opts.StateDir == "" {
		dir, err := os.MkdirTemp(filepath.Dir(abs), ".xpu-fake-sriov-")
		if err != nil {
			return nil, fmt.Errorf("fake SR-IOV kernel: creating its state directory: %w", err)
		}
		k.stateDir, k.ownState = dir, true
	} else {
		k.stateDir = opts.StateDir
		if err := os.MkdirAll(k.stateDir, 0o755); err != nil {
			return nil, fmt.Errorf("fake SR-IOV kernel: %w", err)
		}
	}
	for _, p := range pfs {
		if err := k.mountPF(p); err != nil {
			return nil, errors.Join(err, k.stopAll())
		}
	}
	go k.udevd()
	k.logf("serving %s under %s", strings.Join(k.order, ", "), abs)
	return k, nil
}

// mountPF moves a PF's directory content to the state directory and serves
// it there from FUSE.
func (k *SRIOVKernel) mountPF(p *sriovPF) error {
	st, err := os.Lstat(p.mount)
	if err == nil && !st.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		return fmt.Errorf("fake SR-IOV kernel: PF %s: no directory %s: %w", p.bdf, p.mount, err)
	}
	p.mode = st.Mode().Perm()
	num := filepath.Join(p.mount, "sriov_numvfs")
	nst, err := os.Lstat(num)
	if err == nil && !nst.Mode().IsRegular() {
		err = fmt.Errorf("%w (%s)", fdio.ErrNotRegular, nst.Mode().Type())
	}
	if err != nil {
		return fmt.Errorf("fake SR-IOV kernel: PF %s: no sriov_numvfs file in %s: %w", p.bdf, p.mount, err)
	}
	p.numMode = nst.Mode().Perm()
	b, err := os.ReadFile(num)
	if err != nil {
		return fmt.Errorf("fake SR-IOV kernel: PF %s: %w", p.bdf, err)
	}
	if strings.TrimSpace(string(b)) != fmt.Sprint(p.num) {
		return fmt.Errorf("fake SR-IOV kernel: PF %s: sriov_numvfs reads %q, but the host has %d VFs: was the tree built from this host?", p.bdf, b, p.num)
	}
	backing := filepath.Join(k.stateDir, p.bdf)
	if err := moveDir(p.mount, backing); err != nil {
		return fmt.Errorf("fake SR-IOV kernel: PF %s: %w", p.bdf, err)
	}
	if err := os.Mkdir(p.mount, p.mode); err != nil {
		return errors.Join(fmt.Errorf("fake SR-IOV kernel: PF %s: %w", p.bdf, err), moveDir(backing, p.mount))
	}
	p.backing = backing
	// The kernel's sriov_numvfs is 0644 (DEVICE_ATTR_RW).
	if err := os.Chmod(filepath.Join(p.backing, "sriov_numvfs"), 0o644); err != nil {
		return errors.Join(fmt.Errorf("fake SR-IOV kernel: PF %s: %w", p.bdf, err), k.restorePF(p))
	}
	srv, err := mountLoopback(k, p)
	if err != nil {
		return errors.Join(fmt.Errorf("fake SR-IOV kernel: mounting FUSE on %s (needs root and /dev/fuse): %w", p.mount, err), k.restorePF(p))
	}
	p.server = srv
	return nil
}

// restorePF puts a PF's directory content back in place of its mount point.
func (k *SRIOVKernel) restorePF(p *sriovPF) error {
	if p.backing == "" {
		return nil
	}
	_ = os.Chmod(filepath.Join(p.backing, "sriov_numvfs"), p.numMode)
	if err := os.Remove(p.mount); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("fake SR-IOV kernel: PF %s: removing the mount point: %w", p.bdf, err)
	}
	if err := moveDir(p.backing, p.mount); err != nil {
		return fmt.Errorf("fake SR-IOV kernel: PF %s: putting its directory back: %w", p.bdf, err)
	}
	p.backing = ""
	return nil
}

// Close stops the kernel: udev's pending events are handled at once, the
// mounts go and the PFs' directories are back in the tree, showing the
// VFs of the moment (sriov_numvfs a plain file again). It is idempotent.
func (k *SRIOVKernel) Close() error {
	k.closeOnce.Do(func() {
		k.mu.Lock()
		k.closed = true
		k.mu.Unlock()
		close(k.stop)
		<-k.udevDone
		k.closeErr = k.stopAll()
	})
	return k.closeErr
}

// stopAll unmounts and restores every PF and removes the state directory
// the kernel made.
func (k *SRIOVKernel) stopAll() error {
	var errs []error
	for _, bdf := range k.order {
		p := k.pfs[bdf]
		if p.server != nil {
			if err := p.server.Unmount(); err != nil {
				// Someone holds a file open: detach, the mount
				// goes when they close it.
				if derr := detachMount(p.mount); derr != nil {
					errs = append(errs, fmt.Errorf("fake SR-IOV kernel: unmounting %s: %w (detaching: %w)", p.mount, err, derr))
					continue
				}
				k.logf("unmounting %s: %v; detached it", p.mount, err)
			}
			p.server = nil
		}
		if err := k.restorePF(p); err != nil {
			errs = append(errs, err)
		}
	}
	if k.ownState && len(errs) == 0 {
		if err := os.RemoveAll(k.stateDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NumVFs is the PF's current sriov_numvfs; -1 for an address the kernel
// does not serve.
func (k *SRIOVKernel) NumVFs(pf string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.pfs[pf]; ok {
		return p.num
	}
	return -1
}

// PFs lists the addresses of the PFs the kernel serves, sorted.
func (k *SRIOVKernel) PFs() []string { return append([]string(nil), k.order...) }

// Host is the host as the kernel has it now: the built host with the VFs
// of the moment, new ones with the indexes and minors the driver gave them.
func (k *SRIOVKernel) Host() Host {
	k.mu.Lock()
	defer k.mu.Unlock()
	return cloneHost(k.host)
}

// Writes returns every write to a sriov_numvfs so far, in order.
func (k *SRIOVKernel) Writes() []SRIOVWrite {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]SRIOVWrite(nil), k.writes...)
}

// FailNext makes the next write to pf's sriov_numvfs that the fault applies
// to fail as f says (see Fault). Faults queue up per PF; each is used once.
func (k *SRIOVKernel) FailNext(pf string, f Fault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults[pf] = append(k.faults[pf], f)
}

// Settle waits until udev has handled every pending event, as `udevadm
// settle` does, for at most timeout.
func (k *SRIOVKernel) Settle(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		k.mu.Lock()
		n := len(k.queue)
		k.mu.Unlock()
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fake SR-IOV kernel: %d udev events still pending after %s", n, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (k *SRIOVKernel) logf(format string, args ...any) {
	if k.opts.Log != nil {
		k.opts.Log("fake SR-IOV kernel: "+format, args...)
	}
}

// write is one write(2) to p's sriov_numvfs.
func (k *SRIOVKernel) write(p *sriovPF, data string) syscall.Errno {
	k.mu.Lock()
	defer k.mu.Unlock()
	before := p.num
	errno := k.configure(p, data)
	value := strings.TrimSuffix(data, "\n")
	k.writes = append(k.writes, SRIOVWrite{PF: p.bdf, Value: value, Errno: errno, At: time.Now()})
	switch {
	case errno != 0:
		k.logf("write %q to %s/sriov_numvfs: %v", value, p.bdf, errno)
	case before == p.num:
		k.logf("write %q to %s/sriov_numvfs: %d VFs already", value, p.bdf, p.num)
	default:
		k.logf("write %q to %s/sriov_numvfs: %d -> %d VFs", value, p.bdf, before, p.num)
	}
	return errno
}

// configure is sriov_numvfs_store (drivers/pci/iov.c) with the driver's
// sriov_configure: kstrtou16, -ERANGE above sriov_totalvfs, nothing to do
// for the current count, 0 disables, -EBUSY for a new count while VFs are
// enabled.
func (k *SRIOVKernel) configure(p *sriovPF, data string) syscall.Errno {
	if k.closed {
		return syscall.ENODEV
	}
	if k.takeFault(p.bdf, func(f Fault) bool { return f == FaultWriteError }) {
		return syscall.EIO
	}
	n, ok := kstrtou16(data)
	switch {
	case !ok:
		return syscall.EINVAL
	case n > p.total:
		return syscall.ERANGE
	case n == p.num:
		return 0
	case n != 0 && p.num != 0:
		return syscall.EBUSY
	}
	if n != 0 && k.takeFault(p.bdf, func(f Fault) bool { return f == FaultEnableError }) {
		return syscall.EIO
	}
	var err error
	if n == 0 {
		err = k.disable(p)
	} else {
		err = k.enable(p, n)
	}
	if err != nil {
		k.logf("PF %s: %v", p.bdf, err)
		return syscall.EIO
	}
	return 0
}

// takeFault removes and reports the first queued fault of pf that applies.
func (k *SRIOVKernel) takeFault(pf string, applies func(Fault) bool) bool {
	for i, f := range k.faults[pf] {
		if applies(f) {
			k.faults[pf] = append(k.faults[pf][:i:i], k.faults[pf][i+1:]...)
			return true
		}
	}
	return false
}

// kstrtou16 parses as the kernel's kstrtou16 with base 0: an optional +,
// then 0x hex, 0 octal or decimal, one trailing newline allowed.
func kstrtou16(s string) (int, bool) {
	s = strings.TrimSuffix(s, "\n")
	s = strings.TrimPrefix(s, "+")
	base := 10
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	if s == "" {
		return 0, false
	}
	v := 0
	for _, c := range s {
		var d int
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'f':
			d = int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xffff {
			return 0, false
		}
	}
	return v, true
}

// vfsOf lists the VFs of the PF at bdf, in their order (virtfn0 first).
func (k *SRIOVKernel) vfsOf(bdf string) []Device {
	var vfs []Device
	for _, d := range k.host.Devices {
		if d.Function == FunctionVF && d.PhysFn == bdf {
			vfs = append(vfs, d)
		}
	}
	return vfs
}

func (k *SRIOVKernel) device(bdf string) Device {
	for _, d := range k.host.Devices {
		if d.BDF == bdf && d.Function == FunctionPF {
			return d
		}
	}
	return Device{}
}

// builder writes into the tree as Build does, the PFs' directories mapped
// to their content in the state directory.
func (k *SRIOVKernel) builder(dry bool) *builder {
	moved := map[string]string{}
	for _, p := range k.pfs {
		if p.backing != "" {
			moved[p.dir] = p.backing
		}
	}
	return &builder{
		root: k.root, h: k.host, o: &options{noMknod: !k.realNodes},
		dirs: map[string]bool{}, t: &Tree{Root: k.root, RealNodes: k.realNodes, facts: map[string]NodeFacts{}},
		moved: moved, dry: dry, made: []string{},
	}
}

// addVF writes what the kernel and the driver make for VF number k of pf,
// all but its /dev node (udev's): its PCI function with its physfn link,
// the PF's virtfnK link, its class device and its procfs entries.
func (b *builder) addVF(pf Device, k int, vf Device) error {
	if err := b.pciFunction(vf, nil); err != nil {
		return err
	}
	l := virtfnLink(pf, k, vf)
	if err := b.symlink(l[0], l[1]); err != nil {
		return err
	}
	if err := b.nodeClassDevice(vf); err != nil {
		return err
	}
	return b.procDevice(vf)
}

// removeVF removes what addVF wrote for VF number k of pf.
func (k *SRIOVKernel) removeVF(pf Device, n int, vf Device) error {
	b := k.builder(true)
	if err := b.addVF(pf, n, vf); err != nil {
		return err
	}
	own := []string{pciDir(vf), fmt.Sprintf("/proc/xpu/dev%d", vf.Index), fmt.Sprintf("/proc/kunlun/dev%d", vf.Index)}
	var errs []error
	for _, p := range b.made {
		if !slices.ContainsFunc(own, func(dir string) bool { return underDir(dir, p) }) {
			if err := os.Remove(b.full(p)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	for _, dir := range own {
		if err := os.RemoveAll(b.full(dir)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// underDir reports whether the in-tree path p is dir or below it.
func underDir(dir, p string) bool {
	rest, ok := strings.CutPrefix(p, dir)
	return ok && (rest == "" || rest[0] == '/')
}

// enable creates n VFs of p: the driver numbers them with the lowest free
// indexes (and their minors: the index on 5.x, 2*slot on 4.x), sysfs and
// procfs show them before the write returns, udev makes the nodes later.
func (k *SRIOVKernel) enable(p *sriovPF, n int) error {
	pf := k.device(p.bdf)
	vfs, err := k.host.newVFs(pf, n)
	if err != nil {
		return err
	}
	saved := k.host.Devices
	k.host.Devices = append(append([]Device(nil), saved...), vfs...)
	b := k.builder(false)
	for i, vf := range vfs {
		if err := b.addVF(pf, i, vf); err != nil {
			for j := i; j >= 0; j-- {
				_ = k.removeVF(pf, j, vfs[j])
			}
			k.host.Devices = saved
			return err
		}
	}
	if err := k.setNum(p, n); err != nil {
		return err
	}
	noNodes := k.takeFault(p.bdf, func(f Fault) bool { return f == FaultNoNodes })
	due := k.udevDue(p)
	for _, vf := range vfs {
		if noNodes {
			k.logf("fault %s: no node for %s (xpu%d)", FaultNoNodes, vf.BDF, vf.Index)
			continue
		}
		if !k.host.NoNodes {
			k.enqueue(udevEvent{due: due, add: true, path: fmt.Sprintf("/dev/xpu%d", vf.Index), minor: vf.Minor})
		}
	}
	return nil
}

// disable removes every VF of p: sysfs and procfs before the write returns,
// the nodes when udev gets to them.
func (k *SRIOVKernel) disable(p *sriovPF) error {
	pf := k.device(p.bdf)
	vfs := k.vfsOf(p.bdf)
	var errs []error
	for i, vf := range vfs {
		if err := k.removeVF(pf, i, vf); err != nil {
			errs = append(errs, err)
		}
	}
	kept := k.host.Devices[:0:0]
	for _, d := range k.host.Devices {
		if d.Function != FunctionVF || d.PhysFn != p.bdf {
			kept = append(kept, d)
		}
	}
	k.host.Devices = kept
	if err := k.setNum(p, 0); err != nil {
		errs = append(errs, err)
	}
	due := k.udevDue(p)
	for _, vf := range vfs {
		k.enqueue(udevEvent{due: due, path: fmt.Sprintf("/dev/xpu%d", vf.Index)})
	}
	return errors.Join(errs...)
}

// setNum records p's count and writes it to the backing sriov_numvfs, so
// that stat and a copy of the tree agree with what reads give.
func (k *SRIOVKernel) setNum(p *sriovPF, n int) error {
	p.num = n
	return os.WriteFile(filepath.Join(p.backing, "sriov_numvfs"), fmt.Appendf(nil, "%d\n", n), 0o644)
}

// newVFs are the n VFs the driver makes for pf on h: at the next functions
// of pf's bus, with the lowest indices and minors h does not use (driver
// 5.x: minor = index; 4.x: the probe slot's minor), each with the
// partition table's memory.
func (h Host) newVFs(pf Device, n int) ([]Device, error) {
	mem := vfMemoryMiB(pf, n)
	usedIdx, usedMinor := map[int]bool{}, map[uint32]bool{}
	if !h.NoCtrl {
		usedMinor[h.ctrlMinor()] = true
	}
	for _, d := range h.Devices {
		usedIdx[d.Index] = true
		usedMinor[d.Minor] = true
	}
	var vfs []Device
	next := 0
	for i := range n {
		vf, err := vfOf(pf, i, mem)
		if err != nil {
			return nil, err
		}
		for {
			minor := uint32(next)
			if !h.XRE5() {
				minor = slotMinor(next)
			}
			if !usedIdx[next] && !usedMinor[minor] {
				vf.Index, vf.Minor = next, minor
				usedIdx[next], usedMinor[minor] = true, true
				break
			}
			next++
		}
		vfs = append(vfs, vf)
	}
	return vfs, nil
}

// WithVFs returns h with every SR-IOV PF (TotalVFs > 0, no VFs yet) cut
// into n VFs, as the fake SR-IOV kernel makes them on a write of n to each
// PF's sriov_numvfs, in the order of h.Devices: for hosts built already
// laid out, such as benchmarks'.
func (h Host) WithVFs(n int) (Host, error) {
	counts := make([]int, len(sriovPFs(h)))
	for i := range counts {
		counts[i] = n
	}
	return h.WithCardVFs(counts)
}

// WithCardVFs is WithVFs with a count per card: the i-th SR-IOV PF of
// h.Devices (TotalVFs > 0) gets counts[i] VFs, 0 leaving it whole. There
// must be one count per SR-IOV PF. It does not apply the driver's handle
// budget: that is partition.Plan's rule, for the caller to check.
func (h Host) WithCardVFs(counts []int) (Host, error) {
	pfs := sriovPFs(h)
	if len(counts) != len(pfs) {
		return Host{}, fmt.Errorf("fake host: %d VF counts for %d SR-IOV cards", len(counts), len(pfs))
	}
	out := cloneHost(h)
	for i, pf := range pfs {
		n := counts[i]
		if n < 0 || n > pf.TotalVFs {
			return Host{}, fmt.Errorf("fake host: %d VFs for %s, which has sriov_totalvfs %d", n, pf.BDF, pf.TotalVFs)
		}
		for _, d := range out.Devices {
			if d.Function == FunctionVF && d.PhysFn == pf.BDF {
				return Host{}, fmt.Errorf("fake host: %s has VFs already", pf.BDF)
			}
		}
		if n == 0 {
			continue
		}
		vfs, err := out.newVFs(pf, n)
		if err != nil {
			return Host{}, err
		}
		out.Devices = append(out.Devices, vfs...)
	}
	return out, nil
}

// sriovPFs are the PFs of h with SR-IOV (TotalVFs > 0), in h.Devices order.
func sriovPFs(h Host) []Device {
	var pfs []Device
	for _, d := range h.Devices {
		if d.Function == FunctionPF && d.TotalVFs > 0 {
			pfs = append(pfs, d)
		}
	}
	return pfs
}

// vfMemoryMiB is the memory of each of n VFs of pf: the partition table's
// (pkg/discover), else an even share of the card.
func vfMemoryMiB(pf Device, n int) int {
	if m, ok := discover.PartitionModelOf(pf.Model); ok {
		if mib, ok := m.VFMemoryMiB[n]; ok {
			return int(mib)
		}
	}
	return pf.MemoryMiB / n
}

// udevDue is when udev handles the events of a change of p made now.
func (k *SRIOVKernel) udevDue(p *sriovPF) time.Time {
	delay := k.opts.UdevDelay
	if k.takeFault(p.bdf, func(f Fault) bool { return f == FaultSlowUdev }) {
		delay = k.opts.SlowUdevDelay
		k.logf("fault %s: udev takes %s for %s", FaultSlowUdev, delay, p.bdf)
	}
	return time.Now().Add(delay)
}

func (k *SRIOVKernel) enqueue(ev udevEvent) {
	k.queue = append(k.queue, ev)
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// udevd handles udev's events in order, each when it is due; on Close, all
// that are left at once.
func (k *SRIOVKernel) udevd() {
	defer close(k.udevDone)
	for {
		k.mu.Lock()
		var timer <-chan time.Time
		if len(k.queue) > 0 {
			if wait := time.Until(k.queue[0].due); wait > 0 {
				timer = time.After(wait)
			} else {
				ev := k.queue[0]
				k.queue = k.queue[1:]
				k.udevApply(ev)
				k.mu.Unlock()
				continue
			}
		}
		k.mu.Unlock()
		select {
		case <-timer:
		case <-k.wake:
		case <-k.stop:
			k.mu.Lock()
			for _, ev := range k.queue {
				k.udevApply(ev)
			}
			k.queue = nil
			k.mu.Unlock()
			return
		}
	}
}

// udevApply creates or removes one node; k.mu is held.
func (k *SRIOVKernel) udevApply(ev udevEvent) {
	b := k.builder(false)
	if ev.add {
		if err := b.node(ev.path, ev.minor); err != nil {
			k.logf("udev: creating %s: %v", ev.path, err)
			return
		}
		k.logf("udev: created %s (%d:%d)", ev.path, k.host.Major, ev.minor)
		return
	}
	if err := os.Remove(b.full(ev.path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		k.logf("udev: removing %s: %v", ev.path, err)
		return
	}
	k.logf("udev: removed %s", ev.path)
}

// realNodesOf reports whether the tree's nodes are char devices (else the
// kernel's new nodes are regular files too).
func realNodesOf(root string, h Host) bool {
	for _, d := range h.Devices {
		if st, err := os.Lstat(filepath.Join(root, "dev", fmt.Sprintf("xpu%d", d.Index))); err == nil {
			return st.Mode()&os.ModeCharDevice != 0
		}
	}
	return os.Geteuid() == 0
}

func cloneHost(h Host) Host {
	h.Devices = append([]Device(nil), h.Devices...)
	h.ProbeErrors = append([]ProbeError(nil), h.ProbeErrors...)
	h.Libraries = append([]Library(nil), h.Libraries...)
	return h
}

// moveDir moves the directory src to dst (which must not exist): a rename,
// or a copy and removal across file systems.
func moveDir(src, dst string) error {
	err := os.Rename(src, dst)
	if err == nil || !errors.Is(err, syscall.EXDEV) {
		return err
	}
	if err := copyTree(src, dst); err != nil {
		_ = os.RemoveAll(dst)
		return err
	}
	return os.RemoveAll(src)
}

// copyTree copies directories, regular files and symbolic links, with their
// modes.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			return os.Mkdir(to, fi.Mode().Perm())
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to) //nolint:gosec // G122: a tree the fake kernel moved itself, in its own state directory
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(path) //nolint:gosec // G122: as above
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
				return err
			}
			return os.Chmod(to, fi.Mode().Perm())
		}
		return fmt.Errorf("copying %s: unsupported file type %s", path, fi.Mode().Type())
	})
}
