package cdicompat

import (
	"fmt"
	"slices"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/parser"
)

// Shadow is a spec file whose devices a spec of the same kind in a spec
// directory of higher priority also defines: the engines take those
// devices from Winner, and Shadowed's definitions of them are never used.
// That is how a spec goes stale without a word, e.g. /etc/cdi/X.yaml
// written once by hand under a /var/run/cdi/X.yaml the refresh service
// keeps.
type Shadow struct {
	Kind string
	// Shadowed is the spec file of lower priority, Winner the one the
	// devices are taken from.
	Shadowed, Winner string
	// Devices are the qualified names both define, sorted.
	Devices []string
}

// String says which spec wins, for a warning.
func (s Shadow) String() string {
	names := s.Devices
	more := ""
	if len(names) > 4 {
		names, more = names[:4], fmt.Sprintf(" and %d more", len(s.Devices)-4)
	}
	return fmt.Sprintf("%s is shadowed by %s: both define %s%s (%d device(s) of %s); engines use %s, the later spec directory having priority: remove the spec you do not keep",
		s.Shadowed, s.Winner, strings.Join(names, ", "), more, len(s.Devices), s.Kind, s.Winner)
}

// Shadows lists the spec files shadowed by a spec of higher priority
// (the library's rule: a device defined in two directories is taken from
// the later one), by file pair, in the order the files were read. Devices
// two specs of the same priority define are conflicts (Errors), not
// shadows.
func (s *Specs) Shadows() []Shadow {
	var out []Shadow
	index := map[[2]string]int{}
	for _, spec := range s.Specs {
		for i := range spec.Devices {
			q := parser.QualifiedName(spec.Vendor, spec.Class, spec.Devices[i].Name)
			won, ok := s.Devices[q]
			if !ok || won.Spec == spec || won.Spec.Priority == spec.Priority {
				continue
			}
			key := [2]string{spec.Path, won.Spec.Path}
			j, seen := index[key]
			if !seen {
				j = len(out)
				index[key] = j
				out = append(out, Shadow{Kind: spec.Kind, Shadowed: spec.Path, Winner: won.Spec.Path})
			}
			out[j].Devices = append(out[j].Devices, q)
		}
	}
	for i := range out {
		slices.Sort(out[i].Devices)
	}
	return out
}
