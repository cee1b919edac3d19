package shim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/xpurequest"
)

// errUnprivilegedEnv is returned when an unprivileged container (see
// Privileged) asks for XPUs through XPU_VISIBLE_DEVICES and the
// configuration does not accept that.
var errUnprivilegedEnv = errors.New("XPU_VISIBLE_DEVICES is refused for unprivileged containers")

// errPodMounts is returned when a Kubernetes pod asks for XPUs through the
// device plugin's mounts and the configuration does not accept them.
var errPodMounts = errors.New("device plugin mounts are refused for pods")

// grantPolicy is what of the configuration decides a grant.
type grantPolicy struct {
	// Kind is vendor/class of the devices the shim gives.
	Kind string
	// AcceptEnvvarWhenUnprivileged and FailOnRefusedEnvvar are the
	// configuration's keys (config.Config).
	AcceptEnvvarWhenUnprivileged bool
	FailOnRefusedEnvvar          bool
	// AcceptDevicePluginMounts is the configuration's key: whether the
	// device plugin's mounts grant XPUs to CRI containers.
	AcceptDevicePluginMounts bool
	// ConfigFile names the configuration file in messages.
	ConfigFile string
}

// grant is the decision about a request.
type grant struct {
	// Names are the qualified names the container gets, in order: the
	// orchestrator's grants, then what the variable names when it counts.
	Names []string
	// Refused is true when the variable was refused and nothing else
	// granted: the container starts without XPUs, its bundle unchanged.
	Refused bool
	// Warning, when not empty, is to be logged: the variable was ignored.
	Warning string
}

// decideGrant decides which devices a container that asks for XPUs (req)
// gets under p. The orchestrator's grants (cdi.k8s.io annotations the
// engine forwards, the device plugin's mounts) count; the mounts of a CRI
// container (a pod's) only under AcceptDevicePluginMounts, else they are
// refused with errPodMounts. The variable counts for a privileged container
// (one that may open every device anyway), and for an unprivileged one only
// where the configuration accepts it and no CRI wrote the spec: on a
// Kubernetes node the pod's author sets the environment. Otherwise the variable is ignored when
// there are grants (it is rewritten to what was granted), refused with
// errUnprivilegedEnv under FailOnRefusedEnvvar, or ignored with a warning
// (the container starts without XPUs). An unusable variable value is an
// error naming it.
func decideGrant(req request, p grantPolicy) (grant, error) {
	if req.cri && len(req.Mounted) > 0 && !p.AcceptDevicePluginMounts {
		// Nothing tells the device plugin's mount from a pod's hostPath
		// volume of /dev/null (or of a link to it, which the engine
		// resolves) at the same place. An error, not a container without
		// XPUs: the pod was meant to get them.
		return grant{}, fmt.Errorf("%w: the container asks for XPUs through mounts at %s/ (%s), which a pod with a hostPath volume "+
			"can make too; where the device plugin runs with --device-list-strategy volume-mounts and no pod may use hostPath volumes, "+
			"set accept-device-plugin-mounts = true in %s, else use the cdi-cri strategy (containerd 2.x, CRI-O) or cdi-annotations",
			errPodMounts, xpurequest.MountDir, truncate(strings.Join(req.Mounted, ",")), p.ConfigFile)
	}
	names := req.granted()
	if !req.HasEnv || envNone(req.Env) {
		return grant{Names: names}, nil
	}
	switch {
	case req.privileged || (p.AcceptEnvvarWhenUnprivileged && !req.cri):
		envNames, err := envNames(req.Env, p.Kind)
		if err != nil {
			return grant{}, err
		}
		return grant{Names: append(names, envNames...)}, nil
	case len(names) > 0:
		// The annotations and mounts come from the orchestrator; the
		// variable may come from the image or the pod. applyEdits
		// rewrites it to what was granted.
		return grant{Names: names, Warning: fmt.Sprintf("ignoring %s=%s of an unprivileged container; it gets the devices it was granted (%s)",
			xpurequest.VisibleDevicesEnv, truncate(req.Env), req.describeGrant())}, nil
	case p.FailOnRefusedEnvvar:
		return grant{}, fmt.Errorf("%w: the container asks for %s=%s but is not privileged (its device cgroup rules "+
			"do not allow every device; an image or a pod author can set the variable, so %s). "+
			"Run the container privileged, or ask for the devices with a cdi.k8s.io annotation or the device plugin; "+
			"to start such containers without XPUs instead of failing, set fail-on-refused-envvar = false in %s",
			errUnprivilegedEnv, xpurequest.VisibleDevicesEnv, truncate(req.Env), req.envPolicy(p.ConfigFile), p.ConfigFile)
	default:
		// Framework images bake the variable in; a container that wants
		// no XPU must still run where the shim is the default runtime.
		return grant{Refused: true, Warning: fmt.Sprintf("ignoring %s=%s: the container is not privileged and an image or a pod author can set the variable (%s); "+
			"it starts without XPUs (fail-on-refused-envvar = true in %s makes this an error)",
			xpurequest.VisibleDevicesEnv, truncate(req.Env), req.envPolicy(p.ConfigFile), p.ConfigFile)}, nil
	}
}
