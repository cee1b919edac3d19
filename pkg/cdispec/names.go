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
	DefaultKind   = DefaultVendor + "/" + DefaultClass
)

// DefaultRuntimeSpecPath is the default kind's spec in the runtime CDI
// directory, which has priority over /etc/cdi and is cleared at boot:
// where `xpu-cdi refresh` keeps it, and the spec the device plugin's cdi-*
// strategies ask to be generated.
const DefaultRuntimeSpecPath = runtimeSpecDir + "/" + DefaultVendor + "-" + DefaultClass + ".yaml"

const runtimeSpecDir = "/var/run/cdi"

// RuntimeSpecPath is the spec of kind (vendor/class) in the runtime CDI
// directory: DefaultRuntimeSpecPath for the default kind.
func RuntimeSpecPath(kind string) string {
	vendor, class := parser.ParseQualifier(kind)
	return runtimeSpecDir + "/" + vendor + "-" + class + ".yaml"
}

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
