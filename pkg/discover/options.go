package discover

import (
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
