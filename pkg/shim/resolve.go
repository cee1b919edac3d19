package shim

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/pkg/cdi"
	"github.com/xpu-cdi/xpu-cdi/pkg/config"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// ErrUnknownDevice is returned for a requested name that no device has.
var ErrUnknownDevice = errors.New("unknown XPU device")

// resolver turns qualified names into container edits.
type resolver interface {
	// mode says which mode resolved the names.
	mode() config.Mode
	// names lists the device names (without the kind) that can be asked for.
	names() []string
	// device returns the edits of one qualified name, nil when unknown.
	device(name string) *specs.ContainerEdits
	// inject applies the spec-wide edits once and each device's edits, in
	// the order of names, as the CDI library's Cache.InjectDevices does.
	inject(spec *oci.Spec, names []string) error
}

// SpecOptions are the cdi.New options for the configuration: the same as
// `xpu-cdi generate` with the same vendor, class, --nodes-only, --hook-path
// and --no-hooks (and its defaults for the rest: every name strategy and the
// "all" device).
func SpecOptions(c *config.Config) []cdi.Option {
	opts := []cdi.Option{
		cdi.WithKind(c.Vendor, c.Class),
		cdi.WithNameStrategies(cdi.AllStrategies...),
		cdi.WithDriverFiles(!c.NodesOnly),
		cdi.WithAllDevice(true),
	}
	if !c.NoHooks {
		opts = append(opts, cdi.WithRuntimeHooks(c.HookPath))
	}
	return opts
}

// cdiResolver resolves names from the CDI spec directories.
type cdiResolver struct {
	kind  string
	cache *cdiapi.Cache
}

var _ resolver = (*cdiResolver)(nil)

// newCDICache reads the spec directories once, without a watcher. Spec
// errors (another vendor's broken file) are returned beside a usable cache.
func newCDICache(dirs []string) (*cdiapi.Cache, error) {
	return cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
}

func (r *cdiResolver) mode() config.Mode { return config.ModeCDI }

func (r *cdiResolver) names() []string {
	var out []string
	for _, q := range r.cache.ListDevices() {
		if name, ok := strings.CutPrefix(q, r.kind+"="); ok {
			out = append(out, name)
		}
	}
	return out
}

func (r *cdiResolver) device(name string) *specs.ContainerEdits {
	d := r.cache.GetDevice(name)
	if d == nil {
		return nil
	}
	return &d.ContainerEdits
}

func (r *cdiResolver) inject(spec *oci.Spec, names []string) error {
	if _, err := r.cache.InjectDevices(spec, names...); err != nil {
		return fmt.Errorf("injecting %s: %w", strings.Join(names, ", "), err)
	}
	return nil
}

// hasKind reports whether the cache holds any device of kind.
func hasKind(cache *cdiapi.Cache, kind string) bool {
	for _, q := range cache.ListDevices() {
		if strings.HasPrefix(q, kind+"=") {
			return true
		}
	}
	return false
}

// jitResolver resolves names from a spec built in memory from the host.
type jitResolver struct {
	kind    string
	spec    *specs.Spec
	devices map[string]*specs.Device
}

var _ resolver = (*jitResolver)(nil)

func newJITResolver(c *config.Config, discoverOpts []discover.Option) (*jitResolver, error) {
	opts := append([]discover.Option{discover.WithDevRoot(c.DevRoot), discover.WithDriverRoot(c.DriverRoot)}, discoverOpts...)
	host, err := discover.Discover(opts...)
	if err != nil {
		return nil, fmt.Errorf("discovering the XPUs of the host (dev-root %s, driver-root %s): %w", c.DevRoot, c.DriverRoot, err)
	}
	spec, _, err := cdi.New(host, SpecOptions(c)...)
	if err != nil {
		return nil, fmt.Errorf("building the CDI spec of the host (dev-root %s): %w", c.DevRoot, err)
	}
	r := &jitResolver{kind: spec.Kind, spec: spec, devices: make(map[string]*specs.Device, len(spec.Devices))}
	for i := range spec.Devices {
		d := &spec.Devices[i]
		r.devices[parser.QualifiedName(c.Vendor, c.Class, d.Name)] = d
	}
	return r, nil
}

func (r *jitResolver) mode() config.Mode { return config.ModeJIT }

func (r *jitResolver) names() []string {
	out := make([]string, 0, len(r.spec.Devices))
	for _, d := range r.spec.Devices {
		out = append(out, d.Name)
	}
	return out
}

func (r *jitResolver) device(name string) *specs.ContainerEdits {
	if d := r.devices[name]; d != nil {
		return &d.ContainerEdits
	}
	return nil
}

func (r *jitResolver) inject(spec *oci.Spec, names []string) error {
	edits := &cdiapi.ContainerEdits{ContainerEdits: &specs.ContainerEdits{}}
	specDone := false
	for _, n := range names {
		d := r.devices[n]
		if d == nil {
			return fmt.Errorf("%w %s", ErrUnknownDevice, n)
		}
		if !specDone {
			specDone = true
			edits.Append(&cdiapi.ContainerEdits{ContainerEdits: &r.spec.ContainerEdits})
		}
		edits.Append(&cdiapi.ContainerEdits{ContainerEdits: &d.ContainerEdits})
	}
	if err := edits.Validate(); err != nil {
		return fmt.Errorf("the edits built for %s are invalid: %w", strings.Join(names, ", "), err)
	}
	if err := edits.Apply(spec); err != nil {
		return fmt.Errorf("injecting %s: %w", strings.Join(names, ", "), err)
	}
	return nil
}

// grantedIndices returns the sorted, distinct N of the /dev/xpuN nodes that
// the edits of names give.
func grantedIndices(r resolver, names []string) []int {
	seen := map[int]bool{}
	for _, n := range names {
		e := r.device(n)
		if e == nil {
			continue
		}
		for _, node := range e.DeviceNodes {
			if i, ok := nodeIndex(node.Path); ok {
				seen[i] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

func nodeIndex(path string) (int, bool) {
	s, ok := strings.CutPrefix(path, "/dev/xpu")
	if !ok || s == "" {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == s
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// sortNames orders device names for messages: indices numerically, then the
// rest (PCI addresses, serials, "all") as strings.
func sortNames(names []string) []string {
	out := slices.Clone(names)
	sort.SliceStable(out, func(i, j int) bool {
		a, aerr := strconv.Atoi(out[i])
		b, berr := strconv.Atoi(out[j])
		switch {
		case aerr == nil && berr == nil:
			return a < b
		case aerr == nil:
			return true
		case berr == nil:
			return false
		}
		return out[i] < out[j]
	})
	return out
}
