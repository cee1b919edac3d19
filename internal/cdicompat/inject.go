package cdicompat

import (
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/specs-go"
)

// Resolved is one requested device: the spec it comes from and the edits
// of both, fetched only when they are collected.
type Resolved struct {
	// Spec identifies the spec the device comes from among the Resolved
	// values given to CollectEdits.
	Spec      int
	SpecEdits func() (*specs.ContainerEdits, error)
	Edits     func() (*specs.ContainerEdits, error)
}

// CollectEdits gathers the edits of the requested devices in the order the
// library applies them.
//
// Mirrors (library v1.1.2) the loop of (*Cache).InjectDevices: devices in
// request order; before the first device of each spec, that spec's
// spec-wide edits, once; then the device's own edits; each appended with
// ContainerEdits.Append. The caller validates and applies the result.
func CollectEdits(devices []Resolved) (*cdiapi.ContainerEdits, error) {
	edits := &cdiapi.ContainerEdits{ContainerEdits: &specs.ContainerEdits{}}
	seen := map[int]bool{}
	for _, d := range devices {
		if !seen[d.Spec] {
			seen[d.Spec] = true
			e, err := d.SpecEdits()
			if err != nil {
				return nil, err
			}
			edits.Append(&cdiapi.ContainerEdits{ContainerEdits: e})
		}
		e, err := d.Edits()
		if err != nil {
			return nil, err
		}
		edits.Append(&cdiapi.ContainerEdits{ContainerEdits: e})
	}
	return edits, nil
}
