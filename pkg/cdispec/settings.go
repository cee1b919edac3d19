package cdispec

// Settings describe the spec to build, in the terms users configure it in:
// the flags of `xpu-cdi generate` and `refresh`, and the keys of the shim's
// config.toml for its jit mode. They are New's only configuration, so the
// same settings give the same spec whoever builds it. The zero value is the
// default spec: every name, the all device, the driver files and the
// xpu-runtime-hook hook at DefaultHookPath.
type Settings struct {
	// Vendor and Class make the kind; "" means DefaultVendor/DefaultClass.
	Vendor, Class string
	// NameStrategies choose the device names; empty means AllStrategies.
	NameStrategies []NameStrategy
	// NodesOnly leaves out the driver libraries, and with them the hooks
	// that set them up: the spec has device nodes and tools only, for
	// images that ship their own XRE.
	NodesOnly bool
	// NoAllDevice leaves out the "all" device.
	NoAllDevice bool
	// NoHooks emits no xpu-runtime-hook hooks; otherwise they name HookPath
	// ("" means DefaultHookPath).
	NoHooks  bool
	HookPath string
	// HostRoot is where the host was read through (a container with the
	// host's / mounted at /host): every host path of the spec (device
	// nodes, mounts) is written as the host sees it, with HostRoot
	// stripped; NVIDIA's toolkit calls this transforming the root. "" and
	// "/" are the host itself.
	HostRoot string
}

// withDefaults returns s with every "" or empty field set to its default
// (the one place the defaults are chosen) and its kind checked.
func (s Settings) withDefaults() (Settings, error) {
	s.Vendor, s.Class = s.vendorClass()
	if len(s.NameStrategies) == 0 {
		s.NameStrategies = AllStrategies
	}
	if s.HookPath == "" {
		s.HookPath = DefaultHookPath
	}
	if err := ValidateKind(s.Vendor, s.Class); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// Kind is the kind of the spec New builds for s (vendor/class).
func (s Settings) Kind() string { return Kind(s.vendorClass()) }

// vendorClass returns the vendor and class of s, each defaulted.
func (s Settings) vendorClass() (vendor, class string) {
	vendor, class = s.Vendor, s.Class
	if vendor == "" {
		vendor = DefaultVendor
	}
	if class == "" {
		class = DefaultClass
	}
	return vendor, class
}
