// Package podresources asks the kubelet's PodResources API which
// containers hold which XPUs: the device plugin's device IDs of our
// resource names and the DRA driver's devices. The exporter attributes its
// series with it; `xpu-cdi partition` refuses to re-lay-out a card a
// container holds.
package podresources

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// Defaults.
const (
	// DefaultTimeout bounds one List call.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxMessage bounds one List answer, as the kubelet's own
	// client does (16 MiB).
	DefaultMaxMessage = 16 << 20
	// DefaultCDIKind is the CDI kind of the devices the DRA driver's
	// claims name (baidu.com/xpu=3).
	DefaultCDIKind = cdispec.DefaultKind
)

// Owner is a container that holds an XPU, as the kubelet reports it. Every
// field is a name of the pod's own (the kubelet's record of it), never one
// of its labels or annotations.
type Owner struct {
	Namespace, Pod, Container string
	// Claim and ClaimNamespace are set for an XPU from a DRA claim.
	Claim, ClaimNamespace string
}

// Owners maps the N of /dev/xpuN to the containers holding it.
type Owners map[int][]Owner

// Config configures New; zero fields take the defaults.
type Config struct {
	// Timeout bounds one List call (default DefaultTimeout).
	Timeout time.Duration
	// MaxMessage bounds the size of one List answer (default
	// DefaultMaxMessage).
	MaxMessage int
	// ResourcePrefix is the prefix of the device plugin's resource names
	// (default names.ResourceName).
	ResourcePrefix string
	// Renames are the other names the device plugin advertises XPUs
	// under: the renames of its sharing configuration (rename:
	// example.com/xpu-ts), which need not start with the prefix. Set them
	// with WithSharingFile from the file the plugin reads.
	Renames []string
	// DRADriver is the DRA driver whose claims count (default
	// names.DRADriver).
	DRADriver string
	// CDIKind is the CDI kind of the driver's devices (default
	// DefaultCDIKind): a claim's CDI device KIND=N holds /dev/xpuN.
	CDIKind string
	// Self is a pod (namespace and name) that holds no XPU whatever the
	// kubelet says: the exporter's own pod, whose admin-access claim
	// gives it every XPU of the node to read without taking any. Empty:
	// none.
	Self types.NamespacedName
	// Addresses maps the PCI address of a function to the N of its
	// /dev/xpuN: a claim's CDI device KIND=ADDRESS (the DRA driver's
	// answer in dynamic partition mode, whose device names, xpu-3-q2,
	// name a card and a slot, not a node) holds that node. Nil: such CDI
	// devices are not mapped.
	Addresses map[string]int
	// DynamicCards, when not nil, says that the DRA driver names its
	// devices as its dynamic partition mode does: xpu-N is the card at
	// place N in PCI address order, not /dev/xpuN, and xpu-N-h1, xpu-N-q2
	// its VF slots (names.ParseDRAPartitionDevice). It maps each card
	// that mode cuts, by that place, to its nodes now. A device name of a
	// place it does not have is read as xpu-N for /dev/xpuN (a card the
	// mode cannot cut, offered by its node as in static mode).
	DynamicCards map[int]CardNodes
}

// CardNodes are the nodes of one card: the N of its PF's /dev/xpuN (-1
// when it has none) and of its VFs', in virtfn order (the order of their
// PCI addresses).
type CardNodes struct {
	PF  int
	VFs []int
}

// WithSharingFile returns cfg with the renames of the device plugin's
// sharing configuration file path (its --config-file, NVIDIA's
// sharing.timeSlicing format) added to Renames: every name the plugin
// advertises XPUs under then counts. The file is read for the resource
// cfg.ResourcePrefix (default names.ResourceName) and its partition
// sizes, and checked as the plugin checks it; an empty path changes
// nothing. The flag names the error.
func (cfg Config) WithSharingFile(path string) (Config, error) {
	if path == "" {
		return cfg, nil
	}
	resource := cfg.ResourcePrefix
	if resource == "" {
		resource = names.ResourceName
	}
	p, err := sharing.LoadPolicy(path, resource)
	if err != nil {
		return cfg, err
	}
	cfg.Renames = append(slices.Clone(cfg.Renames), p.Renames()...)
	return cfg, nil
}
