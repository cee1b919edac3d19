// Package cmdflags holds the flag groups the commands share (xpu-cdi's
// subcommands, xpu-device-plugin, xpu-dra-driver and xpu-exporter), so
// that each flag is defined, named, documented, defaulted and checked
// once: where the host is read (Host: --dev-root, --driver-root,
// --driver-arch, --host-root), the CDI kind (Kind: --vendor, --class), the
// CDI spec directories (SpecDirs), the log level (LogLevel) and the
// kubelet-side flags (Kubelet: --resource-name, --dra-driver-name,
// --pod-resources-socket, --health-address, --poll-interval). Each group
// binds its flags to its own fields; every flag also reads an XPU_CDI_*
// environment variable. The API server client's flags are in the
// subpackage kubeclient, so that commands without one do not link
// client-go.
//
// It holds no subcommand and no command's options: those stay in
// internal/cli/* and cmd/*. xpu-runtime-hook keeps its own --log-level
// (XPU_HOOK_LOG_LEVEL): it runs at every container start and does not link
// this package's dependencies (discovery, the CDI library).
package cmdflags
