package validate

import (
	"path"
	"slices"
	"strings"

	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// regenerateFlags are the flags of `xpu-cdi generate` that make a spec
// like spec, as far as the spec shows them: its kind, its device names,
// the "all" device, and its hooks (their path; none: --no-hooks, or
// --nodes-only when it mounts no driver library either). The hint of a
// failed check repeats them, so following it does not turn a nodes-only
// or hook-less spec into a default one.
func regenerateFlags(spec *specs.Spec) []string {
	var flags []string
	if spec.Kind != cdispec.Kind(cdispec.DefaultVendor, cdispec.DefaultClass) {
		if vendor, class, ok := strings.Cut(spec.Kind, "/"); ok {
			flags = append(flags, "--vendor", vendor, "--class", class)
		}
	}
	seen := map[cdispec.NameStrategy]bool{}
	all := false
	for _, d := range spec.Devices {
		switch {
		case d.Name == cdispec.AllDevice:
			all = true
		case isIndex(d.Name):
			seen[cdispec.NameByIndex] = true
		case discover.IsPCIAddress(d.Name):
			seen[cdispec.NameByBDF] = true
		default:
			seen[cdispec.NameBySerial] = true
		}
	}
	if len(seen) < len(cdispec.AllStrategies) {
		for _, s := range cdispec.AllStrategies {
			if seen[s] {
				flags = append(flags, "--device-name-strategy", string(s))
			}
		}
	}
	if !all {
		flags = append(flags, "--no-all-device")
	}
	hooks, libraries := hookPaths(spec), mountsLibraries(spec)
	switch {
	case len(hooks) == 0 && !libraries:
		flags = append(flags, "--nodes-only")
	case len(hooks) == 0:
		flags = append(flags, "--no-hooks")
	case hooks[0] != cdispec.DefaultHookPath:
		flags = append(flags, "--hook-path", hooks[0])
	}
	return flags
}

// hookPaths are the distinct hook programs the spec names, in order.
func hookPaths(spec *specs.Spec) []string {
	var out []string
	add := func(e *specs.ContainerEdits) {
		for _, h := range e.Hooks {
			if !slices.Contains(out, h.Path) {
				out = append(out, h.Path)
			}
		}
	}
	add(&spec.ContainerEdits)
	for i := range spec.Devices {
		add(&spec.Devices[i].ContainerEdits)
	}
	return out
}

// mountsLibraries reports whether the spec mounts a shared library (a
// file named *.so or *.so.N...): the driver files a nodes-only spec lacks.
func mountsLibraries(spec *specs.Spec) bool {
	lib := func(e *specs.ContainerEdits) bool {
		for _, m := range e.Mounts {
			base := path.Base(m.ContainerPath)
			if strings.HasSuffix(base, ".so") || strings.Contains(base, ".so.") {
				return true
			}
		}
		return false
	}
	if lib(&spec.ContainerEdits) {
		return true
	}
	for i := range spec.Devices {
		if lib(&spec.Devices[i].ContainerEdits) {
			return true
		}
	}
	return false
}

func isIndex(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
