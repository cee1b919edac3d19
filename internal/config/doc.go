// Package config reads the configuration of xpu-container-runtime, the file
// /etc/xpu-container-toolkit/config.toml (another path through
// XPU_CONTAINER_TOOLKIT_CONFIG).
//
// Guarantees: parsing is strict (an unknown key is an error that names the
// key and its line), every value is validated after parsing, a missing file
// means the defaults, and DefaultTOML is a commented file that parses back to
// Default(). XPU_DEV_ROOT and XPU_DRIVER_ROOT override the file, as they do
// for the spec generator.
//
// It does not decide what to do with a bad file: the runtime shim logs the
// error and still passes containers that ask for no XPU through.
package config
