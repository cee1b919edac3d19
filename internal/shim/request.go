package shim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// visibleDevicesEnv is the variable a container asks for XPUs with, and
// that the shim sets to the indices of the devices it got.
const visibleDevicesEnv = "XPU_VISIBLE_DEVICES"

// request is what a container asks for.
type request struct {
	// Annotated are the qualified names of the kind from cdi.k8s.io
	// annotations, in annotation key order.
	Annotated []string
	// Foreign are annotated names of other kinds; the shim leaves them alone.
	Foreign []string
	// Env is the value of XPU_VISIBLE_DEVICES (the last one in the
	// environment), HasEnv whether it is set at all.
	Env    string
	HasEnv bool
	// privileged is true when CAP_SYS_ADMIN is in the bounding set.
	privileged bool
}

// readRequest reads the XPU request of a container. Only the annotation
// syntax can be wrong here; names are checked when they are resolved.
func readRequest(spec *oci.Spec, kind string) (request, error) {
	var r request
	// The library parses a map in Go's random order; one key at a time, in
	// key order, gives the same devices in an order that does not change
	// from one create to the next.
	var names []string
	for _, k := range slices.Sorted(maps.Keys(spec.Annotations)) {
		_, n, err := cdiapi.ParseAnnotations(map[string]string{k: spec.Annotations[k]})
		if err != nil {
			return r, fmt.Errorf("reading the cdi.k8s.io annotations of the container: %s: %w", k, err)
		}
		names = append(names, n...)
	}
	for _, n := range names {
		vendor, class, _ := parser.ParseDevice(n)
		if cdispec.Kind(vendor, class) == kind {
			r.Annotated = append(r.Annotated, n)
		} else {
			r.Foreign = append(r.Foreign, n)
		}
	}
	if spec.Process != nil {
		for _, e := range spec.Process.Env {
			if v, ok := strings.CutPrefix(e, visibleDevicesEnv+"="); ok {
				r.Env, r.HasEnv = v, true
			}
		}
	}
	r.privileged = Privileged(spec)
	return r, nil
}

// Privileged reports whether the container holds CAP_SYS_ADMIN in its
// bounding capability set. `docker run --privileged` and `podman run
// --privileged` give every capability; no default capability set of an
// engine includes CAP_SYS_ADMIN, and a process with it can already reach
// every device node (mknod, mount), so an environment request from it
// grants nothing new.
func Privileged(spec *oci.Spec) bool {
	if spec.Process == nil || spec.Process.Capabilities == nil {
		return false
	}
	return slices.Contains(spec.Process.Capabilities.Bounding, "CAP_SYS_ADMIN")
}

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
				return nil, fmt.Errorf("%s=%s: %q is not a valid qualified CDI device name: %w", visibleDevicesEnv, v, tok, err)
			}
			if cdispec.Kind(vendor, class) != kind {
				return nil, fmt.Errorf("%s=%s: %q is not a device of kind %s", visibleDevicesEnv, v, tok, kind)
			}
			out = append(out, parser.QualifiedName(vendor, class, name))
			continue
		}
		if err := parser.ValidateDeviceName(tok); err != nil {
			return nil, fmt.Errorf("%s=%s: %q is not a valid device name: %w", visibleDevicesEnv, v, tok, err)
		}
		out = append(out, kind+"="+tok)
	}
	return out, nil
}

// setVisibleDevices sets XPU_VISIBLE_DEVICES=value in the process
// environment: the first entry is replaced in place, later ones are removed,
// and it is appended when absent.
func setVisibleDevices(p *oci.Process, value string) {
	key := visibleDevicesEnv
	entry := key + "=" + value
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
