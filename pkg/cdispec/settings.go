package cdispec

// Settings describe the spec to build in the terms users configure it in:
// the flags of `xpu-cdi generate` and `refresh`, and the keys of the shim's
// config.toml for its jit mode. Both go through Options, so the same
// settings give the same spec. The zero value is the default spec.
type Settings struct {
	// Vendor and Class make the kind; "" means DefaultVendor/DefaultClass.
	Vendor, Class string
	// NameStrategies choose the device names; empty means AllStrategies.
	NameStrategies []NameStrategy
	// NodesOnly leaves out the driver libraries (WithDriverFiles(false)).
	NodesOnly bool
	// NoAllDevice leaves out the "all" device.
	NoAllDevice bool
	// NoHooks emits no xpu-runtime-hook hooks; otherwise they name HookPath
	// ("" means DefaultHookPath).
	NoHooks  bool
	HookPath string
	// HostRoot is where the host was read through; the spec names host
	// paths without it (WithHostRoot). "" is the host itself.
	HostRoot string
}

// Options returns the New options for s.
func (s Settings) Options() []Option {
	strategies := s.NameStrategies
	if len(strategies) == 0 {
		strategies = AllStrategies
	}
	opts := []Option{
		WithKind(s.Vendor, s.Class),
		WithNameStrategies(strategies...),
		WithDriverFiles(!s.NodesOnly),
		WithAllDevice(!s.NoAllDevice),
	}
	if !s.NoHooks {
		opts = append(opts, WithRuntimeHooks(s.HookPath))
	}
	if s.HostRoot != "" {
		opts = append(opts, WithHostRoot(s.HostRoot))
	}
	return opts
}
