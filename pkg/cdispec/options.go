package cdispec

import (
	"fmt"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/parser"
)

// Default kind of the spec.
const (
	DefaultVendor = "baidu.com"
	DefaultClass  = "xpu"
)

// NameStrategy chooses how devices are named in the spec.
type NameStrategy string

// The device naming strategies.
const (
	NameByIndex  NameStrategy = "index"
	NameByBDF    NameStrategy = "bdf"
	NameBySerial NameStrategy = "serial"
)

// AllStrategies is the default: every device under every name.
var AllStrategies = []NameStrategy{NameByIndex, NameByBDF, NameBySerial}

// ParseNameStrategies validates strategy names given on the command line.
func ParseNameStrategies(names []string) ([]NameStrategy, error) {
	var out []NameStrategy
	seen := map[NameStrategy]bool{}
	for _, n := range names {
		s := NameStrategy(strings.TrimSpace(n))
		switch s {
		case NameByIndex, NameByBDF, NameBySerial:
		default:
			return nil, fmt.Errorf("unknown device name strategy %q (valid: index, bdf, serial)", n)
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

type options struct {
	vendor      string
	class       string
	strategies  []NameStrategy
	driverFiles bool
	allDevice   bool
	hooks       []Hook
	hookPath    string
	hostRoot    string
}

// Option configures New.
type Option func(*options)

// WithKind sets vendor and class (default baidu.com/xpu).
func WithKind(vendor, class string) Option {
	return func(o *options) { o.vendor, o.class = vendor, class }
}

// WithNameStrategies chooses the device names (default AllStrategies).
func WithNameStrategies(s ...NameStrategy) Option {
	return func(o *options) { o.strategies = s }
}

// WithDriverFiles includes (the default) or leaves out the driver libraries
// and tools. Without them the spec has device nodes only, for images that
// ship their own XRE; xpu-smi is still included.
func WithDriverFiles(include bool) Option { return func(o *options) { o.driverFiles = include } }

// WithAllDevice adds (the default) or leaves out the "all" device.
func WithAllDevice(include bool) Option { return func(o *options) { o.allDevice = include } }

// WithRuntimeHooks adds the xpu-runtime-hook hooks (RuntimeHooks) for the
// driver libraries of the spec, with the hook binary at hookPath.
func WithRuntimeHooks(hookPath string) Option {
	return func(o *options) {
		if hookPath == "" {
			hookPath = DefaultHookPath
		}
		o.hookPath = hookPath
	}
}

// WithHooks adds OCI hooks to the spec-wide container edits.
func WithHooks(h ...Hook) Option { return func(o *options) { o.hooks = append(o.hooks, h...) } }

func newOptions(opts []Option) (*options, error) {
	o := &options{driverFiles: true, allDevice: true}
	for _, opt := range opts {
		opt(o)
	}
	if o.vendor == "" {
		o.vendor = DefaultVendor
	}
	if o.class == "" {
		o.class = DefaultClass
	}
	if o.strategies == nil {
		o.strategies = AllStrategies
	}
	if err := ValidateKind(o.vendor, o.class); err != nil {
		return nil, err
	}
	return o, nil
}

// Kind returns the CDI kind vendor/class, e.g. baidu.com/xpu.
func Kind(vendor, class string) string { return vendor + "/" + class }

// ValidateKind checks vendor and class with the CDI parser.
func ValidateKind(vendor, class string) error {
	if err := parser.ValidateVendorName(vendor); err != nil {
		return fmt.Errorf("vendor %q: %w", vendor, err)
	}
	if err := parser.ValidateClassName(class); err != nil {
		return fmt.Errorf("class %q: %w", class, err)
	}
	return nil
}
