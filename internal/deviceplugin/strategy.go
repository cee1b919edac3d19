package deviceplugin

import (
	"fmt"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
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
	// StrategyEnvvar sets XPU_VISIBLE_DEVICES to the index names, for
	// xpu-container-runtime with accept-envvar-when-unprivileged = true.
	StrategyEnvvar Strategy = "envvar"
)

// Strategies lists the strategies, default first.
var Strategies = []Strategy{StrategyCDICRI, StrategyCDIAnnotations, StrategyEnvvar}

// ParseStrategy checks a --device-list-strategy value.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range Strategies {
		if string(st) == s {
			return st, nil
		}
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

// VisibleDevicesEnv is the variable of the envvar strategy.
const VisibleDevicesEnv = "XPU_VISIBLE_DEVICES"

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
	case StrategyEnvvar:
		resp.Envs = map[string]string{VisibleDevicesEnv: strings.Join(ids, ",")}
	default:
		return nil, fmt.Errorf("unknown device list strategy %q", s)
	}
	return resp, nil
}
