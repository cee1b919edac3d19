package nodeinstall

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/labels"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// maxSpecSize bounds a spec file read back from the host.
const maxSpecSize = 16 << 20

// SpecState says what SyncSpec did.
type SpecState string

// The states of the node's spec.
const (
	SpecWritten   SpecState = "written"
	SpecUnchanged SpecState = "unchanged"
	// SpecWaiting: the host has no usable XPU yet (driver not loaded);
	// a spec of the kind written before was removed.
	SpecWaiting SpecState = "waiting"
)

// Installer sets up one node. Create it with New; it holds the host root
// open until Close.
type Installer struct {
	o    *Config
	root *rootfs.Root
	hook []byte

	mu sync.Mutex
	// installed identifies the hook file Install wrote or found equal, so
	// that a poll re-reads it only when it was replaced or removed.
	installed *unix.Stat_t
	// waiting is the last "no usable XPU" message, logged when it changes.
	waiting string
	// noNFD is set while the labels file's directory is missing (logged once).
	noNFD bool
	// partitions is what the last successful partition apply left; nil
	// before one, and after a failed one.
	partitions *partitionState
	// labels are the node's labels as read at labelAt.
	labels  map[string]string
	labelAt time.Time
	// oldLabelWarned is the value of the old layout request label last
	// warned about.
	oldLabelWarned string
}

// New checks cfg and opens the host root. It reads and writes nothing.
func New(cfg Config) (*Installer, error) {
	o, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r, err := rootfs.Open(o.HostRoot)
	if err != nil {
		return nil, err
	}
	return &Installer{o: o, root: r}, nil
}

// readHookSource reads the hook binary to install: it must be a static ELF
// executable, since it runs on the host, whose libraries are not ours.
func readHookSource(p string) ([]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("hook to install: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > maxHookSize {
		return nil, fmt.Errorf("hook to install %s: not a regular file of at most %d bytes", p, maxHookSize)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("hook to install: %w", err)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("hook to install %s is not an ELF executable: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("hook to install %s is dynamically linked: it runs on the host, install the static build (CGO_ENABLED=0)", p)
		}
	}
	return data, nil
}

// Close releases the host root.
func (in *Installer) Close() error { return in.root.Close() }

// HookPath is the installed hook as the host names it: what the spec names.
func (in *Installer) HookPath() string { return path.Join(in.o.HookDir, HookName) }

// SpecPath is the spec as the host names it.
func (in *Installer) SpecPath() string { return in.o.SpecPath }

// onHost names a host path for messages: the path and where it was reached.
func (in *Installer) onHost(p string) string {
	return fmt.Sprintf("%s (through %s)", p, path.Join(in.o.HostRoot, p))
}

// InstallHook makes the hook directory hold the hook: created (with its
// missing parents) when missing, replaced atomically when its content
// differs. It reports whether it wrote. A hook directory that is a symlink
// or not a directory, or that cannot be written, is an error and nothing
// is written.
func (in *Installer) InstallHook() (bool, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.hook == nil {
		hook, err := readHookSource(in.o.HookSource)
		if err != nil {
			return false, err
		}
		in.hook = hook
	}
	if err := in.checkDirs(); err != nil {
		return false, err
	}
	dir, created, err := in.openHookDir(true)
	if err != nil {
		return false, err
	}
	defer dir.Close()
	// Again, now that the missing directories exist: in a sticky parent,
	// someone else may have made one first.
	if err := checkPath(in.root, in.o.HookDir); err != nil {
		return false, fmt.Errorf("hook directory %s: %w", in.onHost(in.o.HookDir), err)
	}
	if err := recordCreated(dir, created); err != nil {
		return false, in.notWritable(err)
	}
	if old, err := readAt(dir, HookName, maxHookSize); err == nil && bytes.Equal(old, in.hook) {
		st, err := lstatAt(dir, HookName)
		if err == nil && st.Mode&0o111 != 0 {
			in.installed = &st
			return false, nil
		}
	}
	if err := rootfs.WriteFileDurable(dir, HookName, in.hook, 0o755); err != nil {
		return false, in.notWritable(err)
	}
	st, err := lstatAt(dir, HookName)
	if err != nil {
		return true, fmt.Errorf("checking the installed hook %s: %w", in.onHost(in.HookPath()), err)
	}
	in.installed = &st
	return true, nil
}

func (in *Installer) notWritable(err error) error {
	return fmt.Errorf("hook directory %s is not writable: %w", in.onHost(in.o.HookDir), err)
}

// openHookDir opens the hook directory without following a symlink at its
// last component; with create, it creates it (and its parents) when
// missing and returns the host paths it created.
func (in *Installer) openHookDir(create bool) (*os.File, []string, error) {
	parentPath, name := path.Dir(in.o.HookDir), path.Base(in.o.HookDir)
	var (
		parent  *os.File
		created []string
		err     error
	)
	if create {
		parent, created, err = ensureDir(in.root, parentPath)
	} else {
		parent, err = in.root.OpenDir(parentPath)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("hook directory %s: %w", in.onHost(in.o.HookDir), err)
	}
	defer parent.Close()
	st, err := lstatAt(parent, name)
	switch {
	case errors.Is(err, unix.ENOENT) && create:
		if err := mkdirRoot(parent, name, in.o.HookDir); err != nil {
			return nil, nil, in.notWritable(err)
		}
		created = append(created, in.o.HookDir)
	case err != nil:
		return nil, nil, fmt.Errorf("hook directory %s: %w", in.onHost(in.o.HookDir), err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		target, _ := os.Readlink(path.Join(in.o.HostRoot, in.o.HookDir))
		return nil, nil, fmt.Errorf("hook directory %s is a symlink (to %s): give the directory itself, so that the spec names the path the hook is at", in.onHost(in.o.HookDir), target)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, nil, fmt.Errorf("hook directory %s is not a directory", in.onHost(in.o.HookDir))
	}
	dir, err := openNoFollow(parent, name, in.o.HookDir)
	if err != nil {
		return nil, nil, fmt.Errorf("hook directory %s: %w", in.onHost(in.o.HookDir), err)
	}
	return dir, created, nil
}

// hookReplaced reports whether the installed hook is gone or is another
// file than the one InstallHook left.
func (in *Installer) hookReplaced() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.installed == nil {
		return true
	}
	dir, _, err := in.openHookDir(false)
	if err != nil {
		return true
	}
	defer dir.Close()
	st, err := lstatAt(dir, HookName)
	return err != nil || st.Dev != in.installed.Dev || st.Ino != in.installed.Ino || st.Size != in.installed.Size
}

// usable reports whether err from discovery or from building the spec
// means the host has no usable XPU (yet).
func notReady(err error) bool {
	return errors.Is(err, discover.ErrNoDevices) || errors.Is(err, discover.ErrNoControlNode) || errors.Is(err, discover.ErrNoComputeDevice)
}

// SyncSpec reads the host and makes the spec file match it: rewritten when
// it differs, removed (if it is of the installer's kind) while the host
// has no usable XPU. With Partitions, the cards are first laid out as
// asked (Sync).
func (in *Installer) SyncSpec() (SpecState, error) { return in.Sync(context.Background()) }

// Sync is SyncSpec, with ctx bounding the partition apply and the read of
// the node label. A layout that cannot be applied is an error, but the
// spec is still made to match the cards as they are.
func (in *Installer) Sync(ctx context.Context) (SpecState, error) {
	partErr := in.applyPartitions(ctx)
	if in.o.LockSpec != nil {
		// The layout lock, after the apply (which takes it itself), and
		// the host read for the spec under it.
		unlock, err := in.o.LockSpec(ctx)
		if err != nil {
			return SpecUnchanged, errors.Join(partErr, fmt.Errorf("the CDI spec %s is left as it is until the next pass: %w", in.onHost(in.o.SpecPath), err))
		}
		defer unlock()
	}
	h, err := in.o.Discover(in.o.HostRoot)
	state, err := in.syncSpec(h, err)
	return state, errors.Join(partErr, err)
}

// applyPartitions lays the cards out as Partitions asks, if it does.
func (in *Installer) applyPartitions(ctx context.Context) error {
	if in.o.Partitions == nil {
		return nil
	}
	h, err := in.o.Discover(in.o.HostRoot)
	if err != nil {
		// The spec's pass reads the host again and says why it cannot.
		return nil
	}
	applied, err := in.syncPartitions(ctx, h)
	if applied {
		if h, derr := in.o.Discover(in.o.HostRoot); derr == nil {
			in.appliedOn(h)
		}
	}
	return err
}

func (in *Installer) syncSpec(h *discover.Host, err error) (SpecState, error) {
	if err == nil {
		var spec []byte
		spec, err = in.buildSpec(h)
		if err == nil {
			state, err := in.writeSpec(spec)
			if err != nil {
				return state, err
			}
			ls := labels.For(h, in.o.ResourceName, in.o.Sharing)
			if in.o.Partitions != nil {
				ls = withoutLayoutLabel(ls)
			}
			return state, in.syncLabels(ls)
		}
	}
	if !notReady(err) {
		return "", err
	}
	if err := in.syncLabels(nil); err != nil {
		return SpecWaiting, err
	}
	if msg := err.Error(); msg != in.waiting {
		in.waiting = msg
		in.o.Log.Warnf("waiting for the Kunlun driver on this node: %v; looking again every %s", err, in.o.Interval)
	}
	if err := in.removeSpec(); err != nil {
		return SpecWaiting, err
	}
	return SpecWaiting, nil
}

func (in *Installer) buildSpec(h *discover.Host) ([]byte, error) {
	s := in.o.Settings
	s.HookPath = in.HookPath()
	s.HostRoot = in.o.HostRoot
	spec, warnings, err := cdispec.New(h, s)
	if err != nil {
		return nil, err
	}
	if in.waiting != "" {
		in.waiting = ""
		in.o.Log.Infof("the Kunlun driver is loaded: %d XPU(s) under %s", len(h.ComputeDevices()), in.onHost(path.Join(in.o.DevRoot, "dev")))
	}
	for _, w := range warnings {
		in.o.Log.Debugf("%s", w)
	}
	if err := cdispec.ValidateSpec(spec); err != nil {
		return nil, err
	}
	f, _ := cdispec.FormatForPath(in.o.SpecPath) // checked by New
	return cdispec.Encode(spec, f)
}

func (in *Installer) writeSpec(data []byte) (SpecState, error) {
	if err := checkPath(in.root, path.Dir(in.o.SpecPath)); err != nil {
		return "", fmt.Errorf("CDI spec directory %s: %w", in.onHost(path.Dir(in.o.SpecPath)), err)
	}
	dir, created, err := ensureDir(in.root, path.Dir(in.o.SpecPath))
	if err != nil {
		return "", fmt.Errorf("CDI spec directory %s: %w", in.onHost(path.Dir(in.o.SpecPath)), err)
	}
	defer dir.Close()
	if err := checkPath(in.root, path.Dir(in.o.SpecPath)); err != nil { // as in InstallHook
		return "", fmt.Errorf("CDI spec directory %s: %w", in.onHost(path.Dir(in.o.SpecPath)), err)
	}
	if len(created) > 0 {
		in.mu.Lock()
		hookDir, _, err := in.openHookDir(false)
		if err == nil {
			err = recordCreated(hookDir, created)
			_ = hookDir.Close()
		}
		in.mu.Unlock()
		if err != nil {
			return "", fmt.Errorf("recording the directories created for the CDI spec: %w", err)
		}
	}
	name := path.Base(in.o.SpecPath)
	if old, err := readAt(dir, name, maxSpecSize); err == nil && bytes.Equal(old, data) {
		return SpecUnchanged, nil
	}
	if err := rootfs.WriteFileDurable(dir, name, data, 0o644); err != nil {
		return "", fmt.Errorf("writing the CDI spec %s (left as it was): %w", in.onHost(in.o.SpecPath), err)
	}
	return SpecWritten, nil
}

// removeSpec removes the spec file if it is a spec of the installer's
// kind; anything else there is left alone.
func (in *Installer) removeSpec() error {
	dir, err := in.root.OpenDir(path.Dir(in.o.SpecPath))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("CDI spec directory %s: %w", in.onHost(path.Dir(in.o.SpecPath)), err)
	}
	defer dir.Close()
	name := path.Base(in.o.SpecPath)
	data, err := readAt(dir, name, maxSpecSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	kind := in.o.Settings.Kind()
	if spec, err := cdispec.Parse(data); err != nil || spec.Kind != kind {
		in.o.Log.Warnf("%s is not a %s spec; left in place", in.onHost(in.o.SpecPath), kind)
		return nil
	}
	if err := unix.Unlinkat(int(dir.Fd()), name, 0); err != nil {
		return fmt.Errorf("removing the CDI spec %s: %w", in.onHost(in.o.SpecPath), err)
	}
	in.o.Log.Infof("removed the CDI spec %s", in.o.SpecPath)
	return nil
}

// Run installs the hook (an error there ends Run), then keeps the spec in
// step with the host until ctx ends: at once, then every interval. A spec
// that cannot be written is logged and tried again at the next poll.
func (in *Installer) Run(ctx context.Context) error {
	in.warnHostPackage()
	wrote, err := in.InstallHook()
	if err != nil {
		return err
	}
	in.logHook(wrote)
	var lastErr string
	for {
		if in.hookReplaced() {
			wrote, err := in.InstallHook()
			if err != nil {
				in.o.Log.Errorf("%v", err)
			} else {
				in.logHook(wrote)
			}
		}
		state, err := in.Sync(ctx)
		switch {
		case err != nil:
			if err.Error() != lastErr {
				in.o.Log.Errorf("%v; trying again every %s", err, in.o.Interval)
			}
			lastErr = err.Error()
		case state == SpecWritten:
			lastErr = ""
			in.o.Log.Infof("wrote the CDI spec %s, naming the hook %s", in.onHost(in.o.SpecPath), in.HookPath())
		default:
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(in.o.Interval):
		}
	}
}

func (in *Installer) logHook(wrote bool) {
	if wrote {
		in.o.Log.Infof("installed %s", in.onHost(in.HookPath()))
	} else {
		in.o.Log.Infof("%s is up to date", in.onHost(in.HookPath()))
	}
}

// Uninstall removes what Install wrote: the spec (if of its kind), the
// labels file, the hook, and the directories Install created, deepest
// first, when empty.
func (in *Installer) Uninstall() error {
	errs := []error{in.syncLabels(nil)}
	in.mu.Lock()
	defer in.mu.Unlock()
	errs = append(errs, in.removeSpec())
	dir, _, err := in.openHookDir(false)
	if errors.Is(err, unix.ENOENT) {
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer dir.Close()
	if err := unix.Unlinkat(int(dir.Fd()), HookName, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("removing the hook %s: %w", in.onHost(in.HookPath()), err))
	} else if err == nil {
		in.o.Log.Infof("removed the hook %s", in.HookPath())
	}
	in.installed = nil
	marker, err := in.readMarker(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return errors.Join(errs...) // install created no directory
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := unix.Unlinkat(int(dir.Fd()), createdMarker, 0); err != nil {
		return errors.Join(append(errs, fmt.Errorf("removing %s: %w", path.Join(in.o.HookDir, createdMarker), err))...)
	}
	// Deepest first; one not empty (someone else's files) stays, with its
	// parents.
	created := strings.Fields(string(marker))
	sort.Slice(created, func(i, j int) bool { return len(created[i]) > len(created[j]) })
	for _, p := range created {
		if !in.mayHaveCreated(p) {
			in.o.Log.Warnf("%s lists %s, which is not a directory xpu-cdi install creates: left in place", path.Join(in.o.HookDir, createdMarker), p)
			continue
		}
		parent, err := in.root.OpenDir(path.Dir(p))
		if err != nil {
			continue
		}
		err = unix.Unlinkat(int(parent.Fd()), path.Base(p), unix.AT_REMOVEDIR)
		_ = parent.Close()
		if err == nil {
			in.o.Log.Infof("removed the directory %s", p)
		}
	}
	return errors.Join(errs...)
}

// readMarker reads the record of the directories Install created, kept in
// the hook directory. It is trusted only as far as that directory is: the
// directory and its parents must pass checkPath (only root can write them)
// and the record must be a regular file owned by root and writable by no
// one else; otherwise it is refused, and Uninstall removes no directory.
func (in *Installer) readMarker(dir *os.File) ([]byte, error) {
	markerPath := path.Join(in.o.HookDir, createdMarker)
	st, err := lstatAt(dir, createdMarker)
	if errors.Is(err, unix.ENOENT) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, &os.PathError{Op: "lstat", Path: markerPath, Err: err}
	}
	if err := checkPath(in.root, in.o.HookDir); err != nil {
		return nil, fmt.Errorf("not removing the directories listed in %s: hook directory %s: %w", markerPath, in.onHost(in.o.HookDir), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("not removing the directories listed in %s: %w", markerPath, fdio.ErrNotRegular)
	}
	if err := checkTrusted(markerPath, dirInfo{uid: st.Uid, gid: st.Gid, mode: st.Mode}, os.Geteuid()); err != nil {
		return nil, fmt.Errorf("not removing the directories listed in it: %w", err)
	}
	return readAt(dir, createdMarker, 64<<10)
}

// mayHaveCreated reports whether p is a directory Install creates when it
// is missing: the hook directory, the spec's directory, or a parent of
// either, never /. Whatever else a record lists is not removed.
func (in *Installer) mayHaveCreated(p string) bool {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return false
	}
	for _, d := range []string{in.o.HookDir, path.Dir(in.o.SpecPath)} {
		if d == p || strings.HasPrefix(d, p+"/") {
			return true
		}
	}
	return false
}

// recordCreated adds the host paths of directories Install created to the
// marker in the hook directory, so that Uninstall, even in another
// process, removes them and no other.
func recordCreated(hookDir *os.File, created []string) error {
	if len(created) == 0 {
		return nil
	}
	old, err := readAt(hookDir, createdMarker, 64<<10)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	all := strings.Fields(string(old))
	for _, c := range created {
		if !slices.Contains(all, c) {
			all = append(all, c)
		}
	}
	return rootfs.WriteFileDurable(hookDir, createdMarker, []byte(strings.Join(all, "\n")+"\n"), 0o644)
}

const labelsWriter = "xpu-cdi install"

// syncLabels makes the labels file hold ls (removed when ls is empty),
// where its directory exists: without NFD's directory nothing is written.
func (in *Installer) syncLabels(ls []labels.Label) error {
	if in.o.LabelsFile == "" {
		return nil
	}
	dir, err := in.root.OpenDir(path.Dir(in.o.LabelsFile))
	if errors.Is(err, unix.ENOENT) {
		if !in.noNFD {
			in.noNFD = true
			in.o.Log.Infof("no %s on this node (Node Feature Discovery not installed?): no node labels written", path.Dir(in.o.LabelsFile))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("labels directory %s: %w", in.onHost(path.Dir(in.o.LabelsFile)), err)
	}
	defer dir.Close()
	in.noNFD = false
	if err := checkPath(in.root, path.Dir(in.o.LabelsFile)); err != nil {
		return fmt.Errorf("labels directory %s: %w", in.onHost(path.Dir(in.o.LabelsFile)), err)
	}
	name := path.Base(in.o.LabelsFile)
	old, err := readAt(dir, name, labels.MaxFileSize)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(ls) == 0 {
		if err != nil {
			return nil // no labels, no file
		}
		if err := unix.Unlinkat(int(dir.Fd()), name, 0); err != nil {
			return fmt.Errorf("removing the node labels %s: %w", in.onHost(in.o.LabelsFile), err)
		}
		in.o.Log.Infof("removed the node labels %s", in.o.LabelsFile)
		return nil
	}
	data, err := labels.Encode(ls, labelsWriter)
	if err != nil {
		return fmt.Errorf("node labels %s: %w", in.o.LabelsFile, err)
	}
	if bytes.Equal(old, data) {
		return nil
	}
	if err := rootfs.WriteFileDurable(dir, name, data, 0o644); err != nil {
		return fmt.Errorf("writing the node labels %s: %w", in.onHost(in.o.LabelsFile), err)
	}
	in.o.Log.Infof("wrote %d node label(s) to %s", len(ls), in.o.LabelsFile)
	return nil
}

// hostPackageFiles are files of the xpu-cdi host package: their refresh
// service writes the node's spec too.
var hostPackageFiles = []string{"/usr/bin/xpu-cdi", "/usr/lib/systemd/system/xpu-cdi-refresh.service", "/lib/systemd/system/xpu-cdi-refresh.service"}

// warnHostPackage says when the host has the xpu-cdi package: its refresh
// service and the installer would both write the spec of the kind.
func (in *Installer) warnHostPackage() {
	for _, p := range hostPackageFiles {
		if f, err := in.root.OpenRegular(p); err == nil {
			_ = f.Close()
			in.o.Log.Warnf("this node has the xpu-cdi host package (%s): its xpu-cdi-refresh service writes the node's CDI spec too; run one of them (the chart's installer.enabled=false on such nodes)", p)
			return
		}
	}
}
