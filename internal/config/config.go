package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// DefaultPath is where the shim reads its configuration.
const DefaultPath = "/etc/xpu-container-toolkit/config.toml"

// DefaultCacheDir is where the shim keeps its cache of resolved CDI specs:
// on tmpfs, gone at reboot.
const DefaultCacheDir = "/run/xpu-container-runtime"

// Environment variables read by Load.
const (
	// EnvPath overrides DefaultPath.
	EnvPath = "XPU_CONTAINER_TOOLKIT_CONFIG"
	// EnvDevRoot and EnvDriverRoot override dev-root and driver-root.
	EnvDevRoot    = "XPU_DEV_ROOT"
	EnvDriverRoot = "XPU_DRIVER_ROOT"
)

// Mode says how the shim turns device names into container edits.
type Mode string

// The modes.
const (
	// ModeAuto uses ModeCDI when a spec of the configured kind is in the
	// spec directories, ModeJIT otherwise.
	ModeAuto Mode = "auto"
	// ModeCDI resolves names from the CDI spec directories.
	ModeCDI Mode = "cdi"
	// ModeJIT discovers the host at create time and builds the spec in
	// memory.
	ModeJIT Mode = "jit"
)

// Config is the shim configuration. Field names are the TOML keys.
type Config struct {
	// LowLevelRuntimes are tried in order; names are looked up on PATH.
	LowLevelRuntimes []string `toml:"low-level-runtimes"`
	Mode             Mode     `toml:"mode"`
	// SpecDirs are the CDI spec directories, lowest priority first.
	SpecDirs []string `toml:"spec-dirs"`
	Vendor   string   `toml:"vendor"`
	Class    string   `toml:"class"`
	// AcceptEnvvarWhenUnprivileged lets unprivileged containers (device
	// rules that do not allow every device) of engines without a CRI ask
	// for devices through XPU_VISIBLE_DEVICES; the shim ignores it for
	// specs written by containerd's CRI or CRI-O (pods set their own
	// environment).
	AcceptEnvvarWhenUnprivileged bool `toml:"accept-envvar-when-unprivileged"`
	// FailOnRefusedEnvvar makes a refused XPU_VISIBLE_DEVICES (an
	// unprivileged container without annotations) fail the create; by
	// default the container starts without XPUs and the shim logs why.
	FailOnRefusedEnvvar bool `toml:"fail-on-refused-envvar"`
	// AcceptDevicePluginMounts lets the device plugin's volume-mounts
	// answer grant XPUs to Kubernetes pods (specs from containerd's CRI or
	// CRI-O). Off by default: a pod with a hostPath volume makes the same
	// mount (through a symlink even where hostPath is limited to a prefix),
	// so the answer is only safe where no pod may use hostPath volumes.
	// Containers of engines without a CRI always get their mounts' XPUs.
	AcceptDevicePluginMounts bool   `toml:"accept-device-plugin-mounts"`
	DevRoot                  string `toml:"dev-root"`
	DriverRoot               string `toml:"driver-root"`
	HookPath                 string `toml:"hook-path"`
	NoHooks                  bool   `toml:"no-hooks"`
	NodesOnly                bool   `toml:"nodes-only"`
	LogFile                  string `toml:"log-file"`
	LogLevel                 string `toml:"log-level"`
	// CacheDir holds what cdi mode resolved from the spec directories,
	// keyed by the content of every spec file; "" turns the cache off.
	CacheDir string `toml:"cache-dir"`
}

// Default returns the built-in configuration.
func Default() *Config {
	return &Config{
		LowLevelRuntimes: []string{"runc", "crun"},
		Mode:             ModeAuto,
		SpecDirs:         slices.Clone(cdiapi.DefaultSpecDirs),
		Vendor:           cdispec.DefaultVendor,
		Class:            cdispec.DefaultClass,
		DevRoot:          "/",
		DriverRoot:       "/",
		HookPath:         cdispec.DefaultHookPath,
		LogLevel:         "info",
		CacheDir:         DefaultCacheDir,
	}
}

// Kind is vendor/class.
func (c *Config) Kind() string { return cdispec.Kind(c.Vendor, c.Class) }

// SpecSettings is the spec jit mode builds: the one `xpu-cdi generate`
// writes with the same vendor, class, --nodes-only, --hook-path and
// --no-hooks, and its defaults for the rest (every name strategy, the "all"
// device).
func (c *Config) SpecSettings() cdispec.Settings {
	return cdispec.Settings{Vendor: c.Vendor, Class: c.Class, NodesOnly: c.NodesOnly, NoHooks: c.NoHooks, HookPath: c.HookPath}
}

// Path returns the configuration path: $XPU_CONTAINER_TOOLKIT_CONFIG or
// DefaultPath.
func Path(getenv func(string) string) string {
	if p := getenv(EnvPath); p != "" {
		return p
	}
	return DefaultPath
}

// Load reads the file named by Path (defaults when it does not exist) and
// applies the environment overrides. On error it still returns a usable
// configuration (the defaults with the environment overrides) next to the
// error, so a caller can carry on where the file does not matter.
func Load(getenv func(string) string) (*Config, string, error) {
	path := Path(getenv)
	c, err := LoadFile(path)
	if err != nil {
		c = Default()
	}
	c.applyEnv(getenv)
	return c, path, err
}

// LoadFile reads path over the defaults; a missing file gives the defaults.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading config %s: %w", path, err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse reads TOML over the defaults, strictly, and validates the result.
func Parse(data []byte) (*Config, error) {
	c := Default()
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		var missing *toml.StrictMissingError
		if errors.As(err, &missing) {
			var keys []string
			for _, e := range missing.Errors {
				row, _ := e.Position()
				keys = append(keys, fmt.Sprintf("%q (line %d)", strings.Join(e.Key(), "."), row))
			}
			return nil, fmt.Errorf("unknown key %s; `xpu-cdi config default` prints every valid key: %w", strings.Join(keys, ", "), err)
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("line %d column %d: %w", row, col, err)
		}
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks every value.
func (c *Config) Validate() error {
	var errs []error
	switch c.Mode {
	case ModeAuto, ModeCDI, ModeJIT:
	default:
		errs = append(errs, fmt.Errorf("mode %q: must be auto, cdi or jit", c.Mode))
	}
	if len(c.LowLevelRuntimes) == 0 {
		errs = append(errs, errors.New("low-level-runtimes is empty: name at least one runtime such as \"runc\""))
	}
	for _, r := range c.LowLevelRuntimes {
		if r == "" || (strings.ContainsRune(r, '/') && !filepath.IsAbs(r)) {
			errs = append(errs, fmt.Errorf("low-level-runtimes: %q must be a name looked up on PATH or an absolute path", r))
		}
	}
	if err := cdispec.ValidateKind(c.Vendor, c.Class); err != nil {
		errs = append(errs, fmt.Errorf("vendor/class: %w", err))
	}
	for _, d := range c.SpecDirs {
		if !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("spec-dirs: %q is not an absolute path", d))
		}
	}
	for key, p := range map[string]string{"dev-root": c.DevRoot, "driver-root": c.DriverRoot, "hook-path": c.HookPath} {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("%s: %q is not an absolute path", key, p))
		}
	}
	if c.CacheDir != "" && !filepath.IsAbs(c.CacheDir) {
		errs = append(errs, fmt.Errorf("cache-dir: %q is not an absolute path", c.CacheDir))
	}
	if c.LogFile != "" && !filepath.IsAbs(c.LogFile) {
		errs = append(errs, fmt.Errorf("log-file: %q is not an absolute path", c.LogFile))
	}
	switch c.LogLevel {
	case "error", "warning", "info", "debug":
	default:
		errs = append(errs, fmt.Errorf("log-level %q: must be error, warning, info or debug", c.LogLevel))
	}
	return errors.Join(errs...)
}

func (c *Config) applyEnv(getenv func(string) string) {
	if v := getenv(EnvDevRoot); v != "" {
		c.DevRoot = v
	}
	if v := getenv(EnvDriverRoot); v != "" {
		c.DriverRoot = v
	}
}
