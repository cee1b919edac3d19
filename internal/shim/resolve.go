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

	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
	"github.com/xpu-cdi/xpu-cdi/internal/config"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// errUnknownDevice is returned for a requested name that no device has.
var errUnknownDevice = errors.New("unknown XPU device")

// editsResolver resolves qualified names to the container edits of the
// devices and of the specs they come from: the specs of the CDI spec
// directories (cdi mode, through the spec cache) or the spec built in memory
// from the host (jit mode).
type editsResolver struct {
	how  config.Mode
	kind string
	// specs are the spec-wide edits, edits the distinct device edits.
	specs, edits []lazyEdits
	// devices are indices into specs and edits by qualified name.
	devices map[string][2]int
}

func (r *editsResolver) mode() config.Mode { return r.how }

// names lists the device names (without the kind) that can be asked for.
func (r *editsResolver) names() []string {
	out := make([]string, 0, len(r.devices))
	for q := range r.devices {
		out = append(out, strings.TrimPrefix(q, r.kind+"="))
	}
	return out
}

func (r *editsResolver) has(name string) bool {
	_, ok := r.devices[name]
	return ok
}

// inject applies the edits as the CDI library's Cache.InjectDevices does:
// for each name in order, the edits of its spec the first time that spec
// is met, then its own; validated, then applied at once. It returns the
// edits it applied.
func (r *editsResolver) inject(spec *oci.Spec, names []string) (*cdiapi.ContainerEdits, error) {
	devices := make([]cdicompat.Resolved, 0, len(names))
	for _, n := range names {
		i, ok := r.devices[n]
		if !ok {
			return nil, fmt.Errorf("%w %s", errUnknownDevice, n)
		}
		devices = append(devices, cdicompat.Resolved{
			Spec: i[0],
			SpecEdits: func() (*specs.ContainerEdits, error) {
				e, err := r.specs[i[0]].get()
				if err != nil {
					return nil, fmt.Errorf("the spec edits of %s: %w", n, err)
				}
				return e, nil
			},
			Edits: func() (*specs.ContainerEdits, error) {
				e, err := r.edits[i[1]].get()
				if err != nil {
					return nil, fmt.Errorf("the edits of %s: %w", n, err)
				}
				return e, nil
			},
		})
	}
	edits, err := cdicompat.CollectEdits(devices)
	if err != nil {
		return nil, err
	}
	if err := edits.Validate(); err != nil {
		return nil, fmt.Errorf("the edits of %s are invalid: %w", strings.Join(names, ", "), err)
	}
	if err := edits.Apply(spec); err != nil {
		return nil, fmt.Errorf("injecting %s: %w", strings.Join(names, ", "), err)
	}
	return edits, nil
}

// resolverOptions are what building a resolver takes besides the
// configuration.
type resolverOptions struct {
	log          logger.Interface
	discoverOpts []discover.Option
	// beforeParse runs between the read of the spec files and their
	// resolution (tests: a spec changed in between).
	beforeParse func()
}

// newResolver picks the mode: cdi and jit as configured; auto is cdi when
// the spec directories hold a device of the kind, jit otherwise. names are
// the qualified names asked for: jit mode discovers no more of the host than
// they need.
func newResolver(c *config.Config, o resolverOptions, names []string) (*editsResolver, error) {
	mode := c.Mode
	if mode == config.ModeCDI || mode == config.ModeAuto {
		r, specErrs := newCDIResolver(c, o)
		var problems error
		if len(specErrs) > 0 {
			problems = fmt.Errorf("problems in the spec files: %s", strings.Join(specErrs, "; "))
			o.log.Warnf("reading the CDI specs in %s: %v", strings.Join(c.SpecDirs, ", "), problems)
		}
		switch {
		case r != nil:
			o.log.Debugf("%s mode: resolving %s from %s", mode, c.Kind(), strings.Join(c.SpecDirs, ", "))
			return r, nil
		case mode == config.ModeCDI:
			return nil, errors.Join(fmt.Errorf("mode cdi: no CDI spec of %s in %s; run `xpu-cdi generate --output /etc/cdi/%s-%s.yaml` or set mode = \"jit\"",
				c.Kind(), strings.Join(c.SpecDirs, ", "), c.Vendor, c.Class), problems)
		}
		o.log.Debugf("auto mode: no CDI spec of %s in %s, discovering the host", c.Kind(), strings.Join(c.SpecDirs, ", "))
	}
	return newJITResolver(c, o, names)
}

// checkNames returns an error naming every name of names that r has no
// device for, and the valid ones; askedBy says who asked, for the message.
func (r *editsResolver) checkNames(names []string, askedBy string) error {
	var unknown []string
	for _, n := range names {
		if !r.has(n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return fmt.Errorf("%w %s (asked for by %s); valid names of %s (%s mode): %s",
		errUnknownDevice, truncate(strings.Join(unknown, ", ")), askedBy, r.kind, r.mode(),
		truncate(strings.Join(sortNames(r.names()), ", ")))
}

// newCDIResolver resolves the kind from the spec directories, through the
// spec cache (specCache.resolve). It returns a nil resolver when the
// directories hold no device of the kind, and the library's messages about
// spec files it could not use.
func newCDIResolver(c *config.Config, o resolverOptions) (*editsResolver, []string) {
	e := newSpecCache(c.CacheDir, c.Kind(), c.SpecDirs).resolve(o.log, o.beforeParse)
	return entryResolver(c, e), e.Errors
}

func entryResolver(c *config.Config, e *specCacheEntry) *editsResolver {
	if len(e.Devices) == 0 {
		return nil
	}
	return &editsResolver{how: config.ModeCDI, kind: c.Kind(), specs: e.Specs, edits: e.Edits, devices: e.Devices}
}

// newJITResolver discovers the host and builds its spec in memory. When
// every name asked for is a device index (the common request: "0", "2,3"),
// only those devices are discovered, with everything spec-wide; the edits of
// an index do not depend on the other devices, so the container gets what a
// full discovery gives it. When that narrow discovery fails or lacks a name
// (no such node, a PF with VFs enabled, no control node), the host is
// discovered in full, which gives the error a full discovery gives, with
// every valid name.
func newJITResolver(c *config.Config, o resolverOptions, names []string) (*editsResolver, error) {
	if indices, ok := requestedIndices(c.Kind(), names); ok {
		r, err := discoverJIT(c, append(slices.Clip(o.discoverOpts), discover.WithIndices(indices...)))
		if err == nil && r.hasAll(names) {
			o.log.Debugf("jit mode: discovered XPUs %s only", discover.JoinIndices(indices))
			return r, nil
		}
		o.log.Debugf("jit mode: discovering XPUs %s only did not resolve %s (%v); discovering the whole host", discover.JoinIndices(indices), strings.Join(names, ", "), err)
	}
	return discoverJIT(c, o.discoverOpts)
}

// discoverJIT discovers the host with opts (after the configured roots) and
// builds its spec.
func discoverJIT(c *config.Config, discoverOpts []discover.Option) (*editsResolver, error) {
	opts := append([]discover.Option{discover.WithDevRoot(c.DevRoot), discover.WithDriverRoot(c.DriverRoot)}, discoverOpts...)
	host, err := discover.Discover(opts...)
	if err != nil {
		return nil, fmt.Errorf("discovering the XPUs of the host (dev-root %s, driver-root %s): %w", c.DevRoot, c.DriverRoot, err)
	}
	spec, _, err := cdispec.New(host, c.SpecSettings())
	if err != nil {
		return nil, fmt.Errorf("building the CDI spec of the host (dev-root %s): %w", c.DevRoot, err)
	}
	r := &editsResolver{
		how: config.ModeJIT, kind: spec.Kind,
		specs:   []lazyEdits{{edits: &spec.ContainerEdits}},
		edits:   make([]lazyEdits, len(spec.Devices)),
		devices: make(map[string][2]int, len(spec.Devices)),
	}
	for i := range spec.Devices {
		d := &spec.Devices[i]
		r.edits[i].edits = &d.ContainerEdits
		r.devices[parser.QualifiedName(c.Vendor, c.Class, d.Name)] = [2]int{0, i}
	}
	return r, nil
}

// requestedIndices returns the device indices of names when each one is
// kind=N with N in canonical decimal form (the form of the spec's index
// names), in order, repeats kept. ok is false when there is no name or
// one of them is anything else: a PCI address, a serial, "all".
func requestedIndices(kind string, names []string) ([]int, bool) {
	if len(names) == 0 {
		return nil, false
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		s, ok := strings.CutPrefix(n, kind+"=")
		if !ok {
			return nil, false
		}
		i, ok := discover.ParseIndex(s)
		if !ok {
			return nil, false
		}
		out = append(out, i)
	}
	return out, true
}

// hasAll reports whether every name is a device of r.
func (r *editsResolver) hasAll(names []string) bool {
	for _, n := range names {
		if !r.has(n) {
			return false
		}
	}
	return true
}

// grantedIndices returns the sorted, distinct N of the /dev/xpuN nodes of
// edits.
func grantedIndices(edits *cdiapi.ContainerEdits) []int {
	var out []int
	for _, node := range edits.DeviceNodes {
		if i, ok := discover.ParseNodePath(node.Path); ok && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
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
