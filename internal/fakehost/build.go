package fakehost

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// MarkerFile is written at the top of every tree (the Tree record as JSON).
// The xpu-fakehost command only deletes directories that carry it.
const MarkerFile = ".xpu-fakehost.json"

type options struct {
	cacheDir string
	cc       string
	crossCC  map[string]string
	arch     string // of the programs BuildTestProgram and friends copy
	noMknod  bool
	log      logger.Interface
}

// Option configures Build.
type Option func(*options)

// WithCacheDir sets the directory where the compiled ELF templates are kept
// (default: <user cache dir>/xpu-cdi/fakehost).
func WithCacheDir(dir string) Option { return func(o *options) { o.cacheDir = dir } }

// WithCompiler sets the C compiler (default "gcc").
func WithCompiler(cc string) Option { return func(o *options) { o.cc = cc } }

// WithCrossCompiler sets the C compiler for the ELF files of machine
// goarch (a Go architecture name) when it is not this one (default: Debian's
// gcc-<triplet>, aarch64-linux-gnu-gcc for arm64).
func WithCrossCompiler(goarch, cc string) Option {
	return func(o *options) {
		if o.crossCC == nil {
			o.crossCC = map[string]string{}
		}
		o.crossCC[goarch] = cc
	}
}

// WithArch makes BuildTestProgram and the other program copies write the
// programs of machine goarch (default: this one), built like the libraries
// of a Host with that Arch.
func WithArch(goarch string) Option { return func(o *options) { o.arch = goarch } }

// WithoutMknod makes device nodes regular files even when running as root.
func WithoutMknod() Option { return func(o *options) { o.noMknod = true } }

// WithLogger sets the logger (default logger.Discard).
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

func newOptions(opts []Option) (*options, error) {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	if o.cc == "" {
		o.cc = "gcc"
	}
	o.log = logger.OrDiscard(o.log)
	if o.cacheDir == "" {
		d, err := defaultCacheDir()
		if err != nil {
			return nil, err
		}
		o.cacheDir = d
	}
	return o, nil
}

// NodeFacts is what stat(2) on a device node would report on the real host.
type NodeFacts struct {
	Major uint32      `json:"major"`
	Minor uint32      `json:"minor"`
	Mode  os.FileMode `json:"mode"` // permission bits only
	UID   uint32      `json:"uid"`
	GID   uint32      `json:"gid"`
}

// TreeDevice records one device as built. Paths are inside the tree
// (prefix them with Tree.Root, or use Tree.Path).
type TreeDevice struct {
	Index      int      `json:"index"`
	Path       string   `json:"path"` // /dev/xpuN
	Major      uint32   `json:"major"`
	Minor      uint32   `json:"minor"`
	BDF        string   `json:"bdf"`
	Serial     string   `json:"serial"`
	Model      string   `json:"model"`
	Family     Family   `json:"family"`
	DeviceName string   `json:"deviceName"`
	DeviceID   uint16   `json:"deviceID"`
	Function   Function `json:"function"`
	// Parent is the PF's BDF for a VF.
	Parent   string `json:"parent,omitempty"`
	NUMANode int    `json:"numaNode"`
	State    string `json:"state"`
	// VFs lists the /dev indexes of a PF's enabled VFs; such a PF is for
	// management only.
	VFs []int `json:"vfs,omitempty"`
	// What exists for the device: its node, its /proc/xpu/devN (none on
	// driver 5.x hosts) and its class device under its PCI function
	// (/sys/class/xpu/xpuN; on 5.x hosts only with Host.NodeClass).
	HasNode  bool `json:"hasNode"`
	HasProc  bool `json:"hasProc"`
	HasSysfs bool `json:"hasSysfs"`
	// SysfsPath is the class device directory (/sys/devices/.../xpu/xpuN,
	// or .../<Host.NodeClass>/xpuN).
	SysfsPath string `json:"sysfsPath,omitempty"`
	// DevChar is the kernel's link to the class device,
	// /sys/dev/char/MAJ:MIN (Host.SysDevChar).
	DevChar string `json:"devChar,omitempty"`
}

// TreeLibrary records a library file (not a link) of the driver.
type TreeLibrary struct {
	Path   string `json:"path"` // /usr/local/xpu-<ver>/<lib64|so>/<file>, or in a system directory
	SONAME string `json:"soname"`
}

// TreeLink records a symbolic link written into the tree.
type TreeLink struct {
	Path   string `json:"path"`
	Target string `json:"target"` // relative, as written
}

// Tree records what Build made under Root.
type Tree struct {
	Root          string        `json:"root"`
	Shape         string        `json:"shape"`
	Major         uint32        `json:"major"`
	DriverVersion string        `json:"driverVersion"`
	XREVersion    string        `json:"xreVersion"`
	RealNodes     bool          `json:"realNodes"`
	Devices       []TreeDevice  `json:"devices"`
	Ctrl          string        `json:"ctrl,omitempty"` // /dev/xpuctrl when built
	Libraries     []TreeLibrary `json:"libraries"`
	Links         []TreeLink    `json:"links"`
	// XREDir is /usr/local/xpu-<ver>; XRELink /usr/local/xpu.
	XREDir  string `json:"xreDir,omitempty"`
	XRELink string `json:"xreLink,omitempty"`
	// Tools are executables: xpu_smi and its /usr/local/bin/xpu-smi link.
	Tools    []string `json:"tools,omitempty"`
	LdSoConf string   `json:"ldSoConf,omitempty"`
	LdCache  string   `json:"ldCache,omitempty"`
	Host     Host     `json:"host"`

	facts map[string]NodeFacts
}

// Path returns the host path of the in-tree path p.
func (t *Tree) Path(p string) string {
	return filepath.Join(t.Root, filepath.FromSlash(p))
}

// NodeFacts returns the kernel facts of the device node at path (a host path,
// i.e. under Root), whether or not the node is a real char device.
func (t *Tree) NodeFacts(path string) (NodeFacts, bool) {
	f, ok := t.facts[filepath.Clean(path)]
	return f, ok
}

// ComputeDevices returns the devices that have a node and may run work (PFs
// with enabled VFs excluded).
func (t *Tree) ComputeDevices() []TreeDevice {
	var out []TreeDevice
	for _, d := range t.Devices {
		if d.HasNode && len(d.VFs) == 0 {
			out = append(out, d)
		}
	}
	return out
}

// Build writes the host h under root (created if missing) and returns what it
// built. The root should be empty: Build overwrites its own paths but leaves
// other files alone.
func Build(root string, h Host, opts ...Option) (*Tree, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("resolving fake host root %s: %w", root, err)
	}
	if abs == "/" {
		return nil, errors.New("refusing to build a fake host over /")
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("creating fake host root %s: %w", abs, err)
	}
	b := &builder{root: abs, h: h, o: o, dirs: map[string]bool{}, t: &Tree{
		Root: abs, Shape: h.Shape, Major: h.Major, DriverVersion: h.DriverVersion, XREVersion: h.XREVersion,
		Host: h, facts: map[string]NodeFacts{},
	}}
	steps := []func() error{b.buildNodes, b.buildProcfs, b.buildSysfs, b.buildDriver, b.writeMarker}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	o.log.Infof("built fake %s host with %d devices under %s", h.Shape, len(h.Devices), abs)
	return b.t, nil
}

func (h *Host) validate() error {
	if h.Major == 0 {
		return errors.New("fake host: major must not be 0")
	}
	if _, err := h.ldArch(); err != nil {
		return err
	}
	if !h.NoDriver && (h.XREVersion == "" || strings.ContainsAny(h.XREVersion, "/\x00")) {
		return fmt.Errorf("fake host: invalid XRE version %q", h.XREVersion)
	}
	idx := map[int]bool{}
	minors := map[uint32]int{}
	pfs := map[string]bool{}
	switch h.Layout {
	case "", LayoutXRE4, LayoutXRE5:
	default:
		return fmt.Errorf("fake host: unknown layout %q (valid: %s, %s)", h.Layout, LayoutXRE4, LayoutXRE5)
	}
	if c := h.NodeClass; c != "" && (c == "." || c == ".." || strings.ContainsAny(c, "/\x00")) {
		return fmt.Errorf("fake host: node class %q is not a directory name", c)
	}
	if !h.NoCtrl {
		minors[h.ctrlMinor()] = -1
	}
	for _, d := range h.Devices {
		if d.Index < 0 || idx[d.Index] {
			return fmt.Errorf("fake host: device index %d negative or repeated", d.Index)
		}
		idx[d.Index] = true
		if other, dup := minors[d.Minor]; dup && !d.NoNode {
			return fmt.Errorf("fake host: xpu%d minor %d already used by %d (-1: xpuctrl)", d.Index, d.Minor, other)
		}
		if !d.NoNode {
			minors[d.Minor] = d.Index
		}
		if d.BDF == "" || d.PCIParent == "" {
			return fmt.Errorf("fake host: xpu%d needs a BDF and a PCI parent", d.Index)
		}
		if d.Function == FunctionPF {
			pfs[d.BDF] = true
		}
	}
	for _, d := range h.Devices {
		if d.Function == FunctionVF && !pfs[d.PhysFn] {
			return fmt.Errorf("fake host: VF xpu%d names PF %q, which is not a device of the host", d.Index, d.PhysFn)
		}
	}
	files := map[string]bool{}
	for _, l := range h.Libraries {
		if strings.Contains(l.Dir, "..") || strings.ContainsRune(l.Dir, 0) || (l.Dir != "" && !strings.HasPrefix(l.Dir, "/") && strings.Contains(l.Dir, "/")) {
			return fmt.Errorf("fake host: library directory %q of %s invalid", l.Dir, l.File)
		}
		for _, n := range append([]string{l.File}, l.DevLinks...) {
			if n == "" || strings.ContainsAny(n, "/\x00") || files[l.Dir+"/"+n] {
				return fmt.Errorf("fake host: library file name %q empty, invalid or repeated", n)
			}
			files[l.Dir+"/"+n] = true
		}
		if l.SONAME == "" || len(l.SONAME) > len(sonamePlaceholder) {
			return fmt.Errorf("fake host: SONAME %q of %s empty or longer than %d bytes", l.SONAME, l.File, len(sonamePlaceholder))
		}
	}
	return nil
}

type builder struct {
	dirs map[string]bool // host directories known to exist
	root string
	h    Host
	o    *options
	t    *Tree

	// The fake SR-IOV kernel's knobs (nil or false for Build): moved maps
	// an in-tree directory to the host directory that holds its content
	// (a PF's directory, whose content backs a FUSE mount); dry makes the
	// writers only record, in made, the in-tree paths they would write.
	moved map[string]string
	dry   bool
	made  []string
}

// full maps an in-tree path to the host path.
func (b *builder) full(p string) string {
	for dir, host := range b.moved {
		if rest, ok := strings.CutPrefix(p, dir); ok && (rest == "" || rest[0] == '/') {
			return filepath.Join(host, filepath.FromSlash(rest))
		}
	}
	return filepath.Join(b.root, filepath.FromSlash(p))
}

// record notes an in-tree path written; true in a dry run, where the
// caller then writes nothing.
func (b *builder) record(p string) bool {
	if b.made != nil || b.dry {
		b.made = append(b.made, p)
	}
	return b.dry
}

// writeFile writes an in-tree file with exactly perm (umask ignored). An
// existing file or link at the path is replaced, never written through.
func (b *builder) writeFile(p string, data []byte, perm os.FileMode) error {
	if b.record(p) {
		return nil
	}
	full := b.full(p)
	if err := b.mkdirFull(filepath.Dir(full)); err != nil {
		return err
	}
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, os.ErrExist) {
		if err := os.Remove(full); err != nil {
			return fmt.Errorf("replacing %s: %w", full, err)
		}
		f, err = os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", full, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", full, err)
	}
	return nil
}

// mkdirFull creates a host directory and its parents once per build.
func (b *builder) mkdirFull(dir string) error {
	if b.dirs[dir] {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for d := dir; len(d) >= len(b.root); d = filepath.Dir(d) {
		b.dirs[d] = true
	}
	return nil
}

func (b *builder) writeText(p, text string, perm os.FileMode) error {
	return b.writeFile(p, []byte(text), perm)
}

func (b *builder) mkdir(p string) error {
	if b.dry {
		return nil
	}
	return b.mkdirFull(b.full(p))
}

// symlink makes the in-tree path link point at the in-tree path target with a
// relative link, so the tree stays valid wherever it is moved.
func (b *builder) symlink(target, link string) error {
	// Relative, in the kernel's form (kernfs_get_target_path): up to an
	// ancestor of the target's parent, then down ending in the target's
	// name, so a class device's "device" link reads ../../../<address>,
	// never ../.. even though the target is an ancestor.
	up, err := filepath.Rel(filepath.Dir(link), filepath.Dir(target))
	if err != nil {
		return fmt.Errorf("relating %s to %s: %w", link, target, err)
	}
	rel := filepath.Join(up, filepath.Base(target))
	if b.record(link) {
		return nil
	}
	full := b.full(link)
	if err := b.mkdirFull(filepath.Dir(full)); err != nil {
		return err
	}
	err = os.Symlink(rel, full)
	if errors.Is(err, os.ErrExist) {
		if err := os.Remove(full); err != nil {
			return fmt.Errorf("replacing %s: %w", full, err)
		}
		err = os.Symlink(rel, full)
	}
	if err != nil {
		return fmt.Errorf("linking %s -> %s: %w", full, rel, err)
	}
	b.t.Links = append(b.t.Links, TreeLink{Path: link, Target: rel})
	return nil
}

func (b *builder) writeMarker() error {
	sort.Slice(b.t.Links, func(i, j int) bool { return b.t.Links[i].Path < b.t.Links[j].Path })
	data, err := json.MarshalIndent(b.t, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the tree record: %w", err)
	}
	return b.writeText("/"+MarkerFile, string(data)+"\n", 0o644)
}
