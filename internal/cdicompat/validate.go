package cdicompat

import (
	"errors"
	"fmt"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	"tags.cncf.io/container-device-interface/specs-go"
)

// ValidateSpec checks a spec with the CDI library's validators.
//
// Mirrors (library v1.1.2) the checks ReadSpec runs after parsing, in
// newSpec -> (*Spec).validate and newDevice -> (*Device).validate (what
// runtimes do when they load a spec): the declared version against the
// content (specs.ValidateVersion), vendor, class and device names, duplicate
// names, devices without edits, and every container edit. It works on the
// value, without encoding and parsing it again; annotations, which xpu-cdi
// never produces, are refused rather than validated.
func ValidateSpec(spec *specs.Spec) error {
	if len(spec.Annotations) > 0 {
		return errors.New("invalid CDI spec: annotations are not produced by xpu-cdi and not validated here")
	}
	if err := specs.ValidateVersion(spec); err != nil {
		return fmt.Errorf("invalid CDI spec: %w", err)
	}
	vendor, class := parser.ParseQualifier(spec.Kind)
	if err := parser.ValidateVendorName(vendor); err != nil {
		return fmt.Errorf("invalid CDI spec kind %q: %w", spec.Kind, err)
	}
	if err := parser.ValidateClassName(class); err != nil {
		return fmt.Errorf("invalid CDI spec kind %q: %w", spec.Kind, err)
	}
	edits := &cdiapi.ContainerEdits{ContainerEdits: &spec.ContainerEdits}
	if err := edits.Validate(); err != nil {
		return fmt.Errorf("invalid CDI spec: %w", err)
	}
	if len(spec.Devices) == 0 {
		return errors.New("invalid CDI spec: no devices")
	}
	seen := make(map[string]bool, len(spec.Devices))
	for i := range spec.Devices {
		d := &spec.Devices[i]
		if err := parser.ValidateDeviceName(d.Name); err != nil {
			return fmt.Errorf("invalid CDI spec: device %q: %w", d.Name, err)
		}
		if seen[d.Name] {
			return fmt.Errorf("invalid CDI spec: multiple devices %q", d.Name)
		}
		seen[d.Name] = true
		if len(d.Annotations) > 0 {
			return fmt.Errorf("invalid CDI spec: device %q: annotations are not produced by xpu-cdi and not validated here", d.Name)
		}
		de := d.ContainerEdits
		if len(de.Env)+len(de.DeviceNodes)+len(de.Hooks)+len(de.Mounts)+len(de.NetDevices)+len(de.AdditionalGIDs) == 0 && de.IntelRdt == nil {
			return fmt.Errorf("invalid CDI spec: device %q has no edits", d.Name)
		}
		if err := (&cdiapi.ContainerEdits{ContainerEdits: &de}).Validate(); err != nil {
			return fmt.Errorf("invalid CDI spec: device %q: %w", d.Name, err)
		}
	}
	return nil
}
