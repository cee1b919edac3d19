package deviceplugin

import (
	"fmt"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/xpu-cdi/xpu-cdi/internal/xpurequest"
)

// Strategy is how Allocate hands devices to a container.
type Strategy string

const (
	// StrategyCDICRI fills the CRI CDIDevices field (ContainerAllocateResponse.cdi_devices)
	// with qualified names: containerd 2.x and CRI-O resolve them.
	StrategyCDICRI Strategy = "cdi-cri"
	// StrategyCDIAnnotations sets a cdi.k8s.io/ annotation with the qualified
	// names: for engines that reach CDI through xpu-container-runtime
	// (containerd 1.6 with container_annotations, Docker is not a CRI).
	StrategyCDIAnnotations Strategy = "cdi-annotations"
	// StrategyVolumeMounts mounts /dev/null at
	// /var/run/xpu-container-devices/<id> for each device, for
	// xpu-container-runtime on engines that forward neither CDI names nor
	// annotations. Only for nodes where no pod may use a hostPath volume
	// (volumeMountsCaveat); the shim takes the mounts of pods only under
	// accept-device-plugin-mounts = true.
	StrategyVolumeMounts Strategy = "volume-mounts"
)

// volumeMountsCaveat is what the plugin logs when it starts with
// StrategyVolumeMounts. No mount source can be the plugin's alone: a
// hostPath volume names any host path (containerd resolves a symlink in it,
// so a prefix-limited hostPath policy does not help), the kubelet reuses an
// allocation's answer at every restart of the container, and nothing in
// the OCI spec tells the plugin's mounts from the pod's volumes.
const volumeMountsCaveat = "device list strategy volume-mounts: a pod with a hostPath volume (even one a policy limits to a prefix, " +
	"through a symlink) can make the same mounts and take every XPU; use it only where no pod may use hostPath volumes, " +
	"with accept-device-plugin-mounts = true in the shim's configuration; cdi-cri or cdi-annotations elsewhere (docs/security.md)"

// strategyEnvvarRemoved is the strategy this release no longer has.
const strategyEnvvarRemoved = "envvar"

// Strategies lists the strategies, default first.
var Strategies = []Strategy{StrategyCDICRI, StrategyCDIAnnotations, StrategyVolumeMounts}

// ParseStrategy checks a --device-list-strategy value.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range Strategies {
		if string(st) == s {
			return st, nil
		}
	}
	if s == strategyEnvvarRemoved {
		// The kubelet puts the plugin's variables before the container's
		// own, and the shim read the last: a pod or its image widened the
		// grant with XPU_VISIBLE_DEVICES=all (docs/security.md).
		return "", fmt.Errorf("device list strategy %q was removed: a pod or its image can set %s itself and so take every XPU; "+
			"use %s (the same shim, an answer a pod cannot forge), %s, or %s where no pod may use hostPath volumes",
			s, xpurequest.VisibleDevicesEnv, StrategyCDIAnnotations, StrategyCDICRI, StrategyVolumeMounts)
	}
	names := make([]string, len(Strategies))
	for i, st := range Strategies {
		names[i] = string(st)
	}
	return "", fmt.Errorf("unknown device list strategy %q: use one of %s", s, strings.Join(names, ", "))
}

// UsesCDISpec reports whether the engine resolves the answer of s against a
// CDI spec of the plugin's kind (so one must exist on the node).
func (s Strategy) UsesCDISpec() bool { return s == StrategyCDICRI || s == StrategyCDIAnnotations }

// AnnotationPlugin is the plugin part of the cdi.k8s.io/ annotation key of
// the cdi-annotations strategy; the device part is the class, so the key of
// the default kind is cdi.k8s.io/xpu-device-plugin_xpu.
const AnnotationPlugin = "xpu-device-plugin"

// containerResponse answers for one container that gets ids (already
// checked) with strategy s; kind is vendor/class.
func containerResponse(s Strategy, kind string, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	resp := &pluginapi.ContainerAllocateResponse{}
	vendor, class := parser.ParseQualifier(kind)
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = parser.QualifiedName(vendor, class, id)
	}
	switch s {
	case StrategyCDICRI:
		for _, n := range names {
			resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: n})
		}
	case StrategyCDIAnnotations:
		annotations, err := cdiapi.UpdateAnnotations(nil, AnnotationPlugin, class, names)
		if err != nil {
			return nil, fmt.Errorf("building the CDI annotation for %s: %w", strings.Join(names, ","), err)
		}
		resp.Annotations = annotations
	case StrategyVolumeMounts:
		for _, id := range ids {
			resp.Mounts = append(resp.Mounts, &pluginapi.Mount{
				ContainerPath: xpurequest.MountDir + "/" + id, HostPath: xpurequest.MountSource, ReadOnly: true,
			})
		}
	default:
		return nil, fmt.Errorf("unknown device list strategy %q", s)
	}
	return resp, nil
}
