package discover

import (
	"fmt"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

type options struct {
	devRoot    string
	driverRoot string
	log        logger.Interface
	stater     NodeStater
	xreDirs    []string
	toolPaths  []string
	// indices, when not nil, select the devices to discover.
	indices []int
	// arch is the machine whose libraries the driver root must hold;
	// archSet is false where that is unknown (no filter).
	arch    elfso.Arch
	archSet bool
	archErr error
}

// Option configures Discover.
type Option func(*options)

// WithDevRoot sets the root under which /dev, /proc and /sys are read.
func WithDevRoot(root string) Option { return func(o *options) { o.devRoot = root } }

// WithDriverRoot sets the root under which driver files are looked up.
func WithDriverRoot(root string) Option { return func(o *options) { o.driverRoot = root } }

// WithLogger sets the logger; the default discards everything.
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

// WithNodeStater replaces the stat(2) of device nodes, for hosts where the
// nodes cannot be real (tests that do not run as root).
func WithNodeStater(s NodeStater) Option { return func(o *options) { o.stater = s } }

// WithIndices restricts discovery to the /dev/xpuN devices of these
// indices: their nodes are stat'ed by name (/dev is not listed) and only
// their procfs and sysfs entries are read. Everything host-wide is read as
// without the option: the control node, the driver version, the driver
// files. What is found of a selected device is what a full discovery finds
// of it: a PF with VFs enabled is still not a compute device, a VF's parent
// is still the PF its physfn link names. An index without a node is absent
// from the result; Discover fails with ErrNoDevices when none of them has
// one, which is also what WithIndices() without an index gives.
//
// What differs from a full discovery: the host's other devices are not in
// the result, the model of a VF whose PF is not selected is derived from
// the PF's PCI IDs alone (a full discovery also uses the PF's procfs family,
// which only tells K100 from K200, boards without SR-IOV), and the PCI
// functions the kunlun driver binds that have no node are not reported
// (each selected device's own binding is still checked).
func WithIndices(indices ...int) Option {
	return func(o *options) {
		o.indices = append([]int{}, indices...)
	}
}

// WithArch names the machine (a Go architecture: amd64, arm64) the
// driver root's libraries must be built for, for a driver root of another
// machine than the one xpu-cdi runs on (a spec written for another host, a
// fake host tree). By default it is the machine xpu-cdi is built for:
// the containers that use the spec run there, and so does their loader. A
// library of another machine is left out with a warning naming it, and
// the driver root's ld.so.cache entries of other machines are not used.
// An unknown name makes Discover fail.
func WithArch(goarch string) Option {
	return func(o *options) {
		o.arch, o.archErr = elfso.ArchByGOARCH(goarch)
		o.archSet = o.archErr == nil
		if o.archErr != nil {
			o.archErr = fmt.Errorf("driver root architecture: %w", o.archErr)
		}
	}
}

// defaultXREDirs are the library directories of the XRE, relative to the
// driver root, in the order they are searched: so (XRE 5), lib64 (XRE 4),
// lib, the order the tools for P800 use. /usr/local/xpu is the version link
// of the XRE install.
var defaultXREDirs = []string{"/usr/local/xpu/so", "/usr/local/xpu/lib64", "/usr/local/xpu/lib"}

// defaultToolPaths are the places xpu-smi is looked for, in order.
var defaultToolPaths = []string{
	"/usr/local/bin/xpu-smi",
	"/usr/local/xpu/bin/xpu-smi",
	"/usr/local/xpu/bin/xpu_smi",
	"/usr/bin/xpu-smi",
	"/usr/bin/xpu_smi",
	"/usr/local/bin/xpu_smi",
}

func newOptions(opts []Option) *options {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	if o.devRoot == "" {
		o.devRoot = "/"
	}
	if o.driverRoot == "" {
		o.driverRoot = "/"
	}
	o.log = logger.OrDiscard(o.log)
	if !o.archSet && o.archErr == nil {
		o.arch, o.archSet = elfso.NativeArch()
	}
	if o.stater == nil {
		o.stater = statNode{}
	}
	if o.xreDirs == nil {
		o.xreDirs = defaultXREDirs
	}
	if o.toolPaths == nil {
		o.toolPaths = defaultToolPaths
	}
	return o
}
