package cdispec

import (
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
)

// ValidateSpec checks a spec the way the CDI library checks a spec file it
// loads (the validators ReadSpec runs after parsing), without encoding and
// parsing it.
func ValidateSpec(spec *specs.Spec) error { return cdicompat.ValidateSpec(spec) }
