// Package runtime implements `xpu-cdi runtime`, whose `configure` subcommand
// registers the xpu-container-runtime shim (and optionally CDI) with
// containerd, CRI-O, Docker or Podman through pkg/runtimeconfig.
package runtime
