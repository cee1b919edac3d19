package shim

import (
	"fmt"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/xpu-cdi/xpu-cdi/internal/xpurequest"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// envNone reports whether an XPU_VISIBLE_DEVICES value asks for nothing.
func envNone(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "none", "void":
		return true
	}
	return false
}

// envNames turns an XPU_VISIBLE_DEVICES value into qualified names of kind:
// "all", indices, PCI addresses and serials become kind=NAME; qualified
// names are kept. A malformed entry is an error naming it.
func envNames(v, kind string) ([]string, error) {
	if envNone(v) {
		return nil, nil
	}
	var out []string
	for _, tok := range strings.Split(v, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		if strings.EqualFold(tok, "all") {
			tok = "all" // keywords are case-insensitive, as NONE and VOID
		}
		if strings.Contains(tok, "=") {
			vendor, class, name, err := parser.ParseQualifiedName(tok)
			if err != nil {
				return nil, fmt.Errorf("%s=%s: %q is not a valid qualified CDI device name: %w", xpurequest.VisibleDevicesEnv, truncate(v), truncate(tok), err)
			}
			if cdispec.Kind(vendor, class) != kind {
				return nil, fmt.Errorf("%s=%s: %q is not a device of kind %s", xpurequest.VisibleDevicesEnv, truncate(v), truncate(tok), kind)
			}
			out = append(out, parser.QualifiedName(vendor, class, name))
			continue
		}
		if err := parser.ValidateDeviceName(tok); err != nil {
			return nil, fmt.Errorf("%s=%s: %q is not a valid device name: %w", xpurequest.VisibleDevicesEnv, truncate(v), truncate(tok), err)
		}
		out = append(out, kind+"="+tok)
	}
	return out, nil
}

// setVisibleDevices sets XPU_VISIBLE_DEVICES to indices in the process
// environment: the first entry is replaced in place, later ones are removed,
// and it is appended when absent.
func setVisibleDevices(p *oci.Process, indices []int) {
	key := xpurequest.VisibleDevicesEnv
	entry := key + "=" + discover.JoinIndices(indices)
	out := p.Env[:0:0]
	done := false
	for _, e := range p.Env {
		if strings.HasPrefix(e, key+"=") {
			if !done {
				out = append(out, entry)
				done = true
			}
			continue
		}
		out = append(out, e)
	}
	if !done {
		out = append(out, entry)
	}
	p.Env = out
}
