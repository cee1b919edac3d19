package xpunode

import (
	"errors"
	"fmt"
	"slices"

	"tags.cncf.io/container-device-interface/pkg/parser"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// ErrNoNodeSpec is RefreshSpecDevices's error when the spec directories
// hold no spec of the kind to refresh.
var ErrNoNodeSpec = errors.New("no node spec of the kind")

// RefreshSpecDevices rewrites the devices of the node's specs of kind in
// dirs after the host's functions changed (an SR-IOV re-layout): each
// readable spec of the kind gets the devices of h under every name
// (index, PCI address, serial, as cdispec.New names them), and "all"
// when it had it; everything else it holds (the control node, the
// driver's files, the hooks, whatever settings wrote them) is kept, so
// that the file stays what its writer (`xpu-cdi generate`, the refresh
// service, the installer) made of it. Device node host paths are read
// below devRoot, which stands for the host's /. Each file is written
// atomically and validated first: a spec that cannot be refreshed is left
// as it was. It returns the files it wrote.
func RefreshSpecDevices(kind string, dirs []string, devRoot string, h *discover.Host) ([]string, error) {
	files, err := cdicompat.ReadSpecFiles(cdicompat.SpecDirs(dirs))
	if err != nil {
		return nil, fmt.Errorf("reading the CDI spec directories %v: %w", dirs, err)
	}
	vendor, class := parser.ParseQualifier(kind)
	if err := cdispec.ValidateKind(vendor, class); err != nil {
		return nil, fmt.Errorf("CDI kind %q: %w", kind, err)
	}
	var wrote []string
	var errs []error
	for _, f := range files {
		path := f.Path()
		if f.Err != nil {
			continue
		}
		old, err := cdispec.Parse(f.Data)
		if err != nil || old.Kind != kind {
			continue
		}
		hadAll := slices.ContainsFunc(old.Devices, func(d specs.Device) bool { return d.Name == cdispec.AllDevice })
		fresh, _, err := cdispec.New(h, cdispec.Settings{Vendor: vendor, Class: class, NodesOnly: true, NoHooks: true, NoAllDevice: !hadAll, HostRoot: devRoot})
		if err != nil {
			errs = append(errs, fmt.Errorf("building the devices of %s: %w", path, err))
			continue
		}
		out := *old
		out.Devices = fresh.Devices
		v, err := specs.MinimumRequiredVersion(&out)
		if err != nil {
			errs = append(errs, fmt.Errorf("the CDI version of %s: %w", path, err))
			continue
		}
		out.Version = v
		format, err := cdispec.FormatForPath(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("CDI spec %s: %w", path, err))
			continue
		}
		if err := cdispec.WriteFile(path, &out, format); err != nil {
			errs = append(errs, fmt.Errorf("rewriting the devices of CDI spec %s: %w", path, err))
			continue
		}
		wrote = append(wrote, path)
	}
	if len(wrote) == 0 && len(errs) == 0 {
		return nil, fmt.Errorf("%w %s in %v: create it with %s", ErrNoNodeSpec, kind, dirs, SpecHint(kind))
	}
	return wrote, errors.Join(errs...)
}
