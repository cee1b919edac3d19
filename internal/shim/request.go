package shim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/xpu-cdi/xpu-cdi/internal/xpurequest"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// request is what a container asks for.
type request struct {
	// Annotated are the qualified names of the kind from cdi.k8s.io
	// annotations, in annotation key order.
	Annotated []string
	// Foreign are annotated names of other kinds; the shim leaves them alone.
	Foreign []string
	// Mounted are the qualified names of the device plugin's mounts
	// (xpurequest.MountDir), in mount order.
	Mounted []string
	// Unused are the cdi.k8s.io annotation keys the shim does not take
	// because of the engine (CRIOAnnotationsIgnored).
	Unused []string
	// Env is the value of XPU_VISIBLE_DEVICES (the last one in the
	// environment), HasEnv whether it is set at all.
	Env    string
	HasEnv bool
	// privileged is true when every device is allowed (Privileged).
	privileged bool
	// cri is true when a CRI engine (containerd's CRI, CRI-O) wrote the
	// spec: a Kubernetes pod, whose author sets its environment.
	cri bool
}

// granted are the names the container gets whatever its environment says:
// from the orchestrator (annotations, the device plugin's mounts).
func (r request) granted() []string { return append(slices.Clip(r.Annotated), r.Mounted...) }

// asks reports whether the container asks for any XPU at all: a grant, or
// the variable naming devices (which decideGrant may still refuse).
func (r request) asks() bool {
	return len(r.Annotated) > 0 || len(r.Mounted) > 0 || (r.HasEnv && !envNone(r.Env))
}

// Annotations that tell which engine wrote a spec. A pod author could set
// one on a pod only where the engine forwards pod annotations; either way,
// one that is present only ever takes grants away.
const (
	// containerManagerAnnotation names the engine that wrote the spec:
	// CRI-O writes "cri-o" into every container's spec (after the pod's
	// annotations, so a pod cannot change it), Podman "libpod". Podman
	// also writes io.kubernetes.cri-o.TTY and ...Created: those keys do
	// not tell CRI-O.
	containerManagerAnnotation = "io.container.manager"
	containerManagerCRIO       = "cri-o"
	// containerdCRIAnnotation is set by containerd's CRI plugin (1.x and
	// 2.x) on every container and sandbox it creates.
	containerdCRIAnnotation = "io.kubernetes.cri.container-type"
)

// writtenByCRIO reports whether CRI-O wrote the spec.
func writtenByCRIO(a map[string]string) bool {
	return a[containerManagerAnnotation] == containerManagerCRIO
}

// readRequest reads the XPU request of a container. Only the annotation
// syntax can be wrong here; names are checked when they are resolved.
func readRequest(spec *oci.Spec, kind string) (request, error) {
	var r request
	crio := writtenByCRIO(spec.Annotations)
	_, r.cri = spec.Annotations[containerdCRIAnnotation]
	r.cri = r.cri || crio
	// The library parses a map in Go's random order; one key at a time, in
	// key order, gives the same devices in an order that does not change
	// from one create to the next.
	var names []string
	for _, k := range slices.Sorted(maps.Keys(spec.Annotations)) {
		_, n, err := cdiapi.ParseAnnotations(map[string]string{k: spec.Annotations[k]})
		if err != nil {
			if crio {
				continue // not ours to read on CRI-O; CRI-O parsed the container's own
			}
			return r, fmt.Errorf("reading the cdi.k8s.io annotations of the container: %s: %w", k, err)
		}
		if crio && len(n) > 0 {
			// CRI-O copies every pod annotation into every container
			// (SpecAddAnnotations in internal/factory/container) and has
			// already injected the container's own cdi.k8s.io devices
			// itself (specInjectCDIDevices): neither is the shim's to give.
			r.Unused = append(r.Unused, k)
			continue
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
	for _, m := range spec.Mounts {
		name, ok := strings.CutPrefix(m.Destination, xpurequest.MountDir+"/")
		if !ok || m.Source != xpurequest.MountSource || (m.Type != "bind" && m.Type != "") || strings.Contains(name, "/") {
			continue
		}
		q := kind + "=" + name
		if !slices.Contains(r.Mounted, q) {
			r.Mounted = append(r.Mounted, q)
		}
	}
	if spec.Process != nil {
		for _, e := range spec.Process.Env {
			if v, ok := strings.CutPrefix(e, xpurequest.VisibleDevicesEnv+"="); ok {
				r.Env, r.HasEnv = v, true
			}
		}
	}
	r.privileged = Privileged(spec)
	return r, nil
}

// Privileged reports whether the spec's device cgroup rules
// (linux.resources.devices) allow every device: an allow rule of type "a"
// (or none) without major and minor (or -1, "*") and with access rwm, not
// followed by a deny rule. That is what `docker run --privileged`, `podman
// run --privileged`, containerd's and CRI-O's privileged containers write
// (and `--device-cgroup-rule 'a *:* rwm'`). Such a container can already
// open every device node it can reach, so a device given to it through
// XPU_VISIBLE_DEVICES is access it had. Capabilities are no such sign: a
// container given CAP_SYS_ADMIN alone still has the engine's device rules
// and could not open an XPU it was not given.
func Privileged(spec *oci.Spec) bool {
	if spec.Linux == nil || spec.Linux.Resources == nil {
		return false
	}
	all := false
	for _, d := range spec.Linux.Resources.Devices {
		switch {
		case !d.Allow:
			all = false
		case allowsEveryDevice(d):
			all = true
		}
	}
	return all
}

func allowsEveryDevice(d oci.LinuxDeviceCgroup) bool {
	wild := func(n *int64) bool { return n == nil || *n == -1 }
	access := d.Access
	return (d.Type == "" || d.Type == "a") && wild(d.Major) && wild(d.Minor) &&
		strings.Contains(access, "r") && strings.Contains(access, "w") && strings.Contains(access, "m")
}

// describeGrant names what the orchestrator granted, for messages.
func (r request) describeGrant() string {
	var parts []string
	if len(r.Annotated) > 0 {
		parts = append(parts, "cdi.k8s.io annotations "+truncate(strings.Join(r.Annotated, ",")))
	}
	if len(r.Mounted) > 0 {
		parts = append(parts, "device plugin mounts "+truncate(strings.Join(r.Mounted, ",")))
	}
	return strings.Join(parts, " and ")
}

// describe names what the container asked for, for messages.
func (r request) describe() string {
	parts := []string{}
	if g := r.describeGrant(); g != "" {
		parts = append(parts, g)
	}
	if r.HasEnv && !envNone(r.Env) {
		parts = append(parts, xpurequest.VisibleDevicesEnv+"="+truncate(r.Env))
	}
	return strings.Join(parts, " and ")
}

// envPolicy says why the variable of an unprivileged container is refused.
// file is the shim's configuration file.
func (r request) envPolicy(file string) string {
	if r.cri {
		return "on a Kubernetes node (a spec from containerd's CRI or CRI-O) the variable is never taken from an unprivileged container"
	}
	return "only privileged containers may use it unless accept-envvar-when-unprivileged = true in " + file
}

// maxQuoted bounds what a message quotes of a value from the spec: an
// annotation or variable of megabytes would otherwise be copied whole into
// every log line and error about it.
const maxQuoted = 512

// truncate cuts s to maxQuoted bytes, saying how much was left out.
func truncate(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:maxQuoted], len(s)-maxQuoted)
}
