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

// DefaultSpecPath is where the node spec of the default kind lives: the
// file the packages' refresh service keeps, the chart's installer writes
// and README's first command writes. /etc/cdi is the one directory every
// engine reads: Podman 5.5.0 to 5.5.2 read only /etc/cdi
// (containers/common#2460) and ignored cdi_spec_dirs, while Podman 4 and 5.4, Docker 25+,
// containerd 1.7+ and CRI-O read /etc/cdi and /var/run/cdi (see
// docs/packaging.md, "Where the spec lives").
const DefaultSpecPath = specDir + "/" + DefaultVendor + "-" + DefaultClass + ".yaml"

// LegacySpecPath is where the refresh service of earlier packages kept the
// spec of the default kind. A spec of the same devices there has priority
// over DefaultSpecPath (the library's later directory wins), so the
// packages remove it on upgrade.
const LegacySpecPath = legacySpecDir + "/" + DefaultVendor + "-" + DefaultClass + ".yaml"

const (
	specDir       = "/etc/cdi"
	legacySpecDir = "/var/run/cdi"
)

// SpecPath is the node spec of kind (vendor/class) in the spec directory
// every engine reads: DefaultSpecPath for the default kind.
func SpecPath(kind string) string {
	vendor, class := parser.ParseQualifier(kind)
	return specDir + "/" + vendor + "-" + class + ".yaml"
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
