package config

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultTOML returns the default configuration as a commented TOML file:
// every key, set to its default value, with what it does. It parses back to
// Default().
func DefaultTOML() string {
	d := Default()
	return fmt.Sprintf(`# xpu-container-runtime configuration (%[1]s).
# Another file can be named with %[2]s=PATH.
# Every key is optional; the values below are the defaults. Unknown keys are
# an error. Reference: docs/shim.md.

# Low-level OCI runtimes, tried in order: names looked up on PATH or absolute
# paths. The first one found runs every container. The shim never runs itself.
low-level-runtimes = %[3]s

# How device names become container edits:
#   "cdi"  resolve them from the CDI specs in spec-dirs (written by
#          xpu-cdi generate or the refresh service);
#   "jit"  discover the host at every create and build the spec in memory
#          (never stale, costs a discovery per XPU container);
#   "auto" "cdi" when spec-dirs hold a spec of vendor/class, else "jit".
mode = %[4]q

# CDI spec directories, lowest priority first (as in the CDI library).
spec-dirs = %[5]s

# CDI kind of the XPU devices: vendor/class.
vendor = %[6]q
class = %[7]q

# Unprivileged containers (their device cgroup rules do not allow every
# device, as --privileged does) may not ask for XPUs through the
# XPU_VISIBLE_DEVICES variable: an image or a pod author can set it. They
# still get XPUs through cdi.k8s.io annotations and the device plugin.
# true accepts the variable from every container of engines without a CRI
# (Docker, Podman, ctr); it never applies to Kubernetes pods (specs from
# containerd's CRI or CRI-O).
accept-envvar-when-unprivileged = %[8]t

# What happens to such a container when it sets the variable and has no
# other grant: by default it starts without XPUs (the shim logs a warning
# saying why); true makes its creation fail with that reason.
fail-on-refused-envvar = %[17]t

# Kubernetes pods (specs from containerd's CRI or CRI-O) get XPUs from the
# device plugin's volume-mounts answer (read-only mounts of /dev/null at
# /var/run/xpu-container-devices/ID) only when this is true. A pod with a
# hostPath volume can make the same mount (through a symlink even where
# hostPath is limited to a prefix), so set it only on nodes where no pod may
# use hostPath volumes; use the cdi-annotations strategy elsewhere.
# Containers of engines without a CRI always get the XPUs of such mounts.
accept-device-plugin-mounts = %[18]t

# jit mode: where the host is read. XPU_DEV_ROOT and XPU_DRIVER_ROOT in the
# shim's environment override these.
dev-root = %[9]q
driver-root = %[10]q

# jit mode: the xpu-runtime-hook binary the edits name (ld.so.cache update
# and library links inside the container), or no hooks at all.
hook-path = %[11]q
no-hooks = %[12]t

# jit mode: device nodes and xpu-smi only, no driver libraries (for images
# that ship their own XRE).
nodes-only = %[13]t

# The shim's own log: a file it appends to ("" for none) and its level
# (error, warning, info, debug). Errors also go to stderr and to the --log
# file that the engine passes to the runtime.
log-file = %[14]q
log-level = %[15]q

# cdi and auto modes: a directory (root's, not writable by others) where the
# shim keeps what it resolved from spec-dirs, so that a create does not parse
# every spec again. An entry is used only while every spec file has the
# content it was built from. "" turns the cache off.
cache-dir = %[16]q
`, DefaultPath, EnvPath, tomlList(d.LowLevelRuntimes), d.Mode, tomlList(d.SpecDirs), d.Vendor, d.Class,
		d.AcceptEnvvarWhenUnprivileged, d.DevRoot, d.DriverRoot, d.HookPath, d.NoHooks, d.NodesOnly,
		d.LogFile, d.LogLevel, d.CacheDir, d.FailOnRefusedEnvvar, d.AcceptDevicePluginMounts)
}

func tomlList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
