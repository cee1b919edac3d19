package testenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// PodmanConfig is the configuration of a private Podman: everything it
// writes (storage, runtime state, events, volumes, temporary files) lives
// under Dir. Pass Args before the subcommand and Env to every podman call.
type PodmanConfig struct {
	// Dir holds the configuration files, storage and state.
	Dir string
	// ConfPath is containers.conf (CONTAINERS_CONF).
	ConfPath string
	// StorageConfPath is storage.conf (CONTAINERS_STORAGE_CONF).
	StorageConfPath string
	// RegistriesConfPath is registries.conf (CONTAINERS_REGISTRIES_CONF):
	// no unqualified search registries, so a short name is never pulled.
	RegistriesConfPath string
	// Root and RunRoot are the storage graph root and run root.
	Root    string
	RunRoot string
}

// WritePodmanConfig creates dir and writes containers.conf, storage.conf and
// registries.conf in it for a Podman whose containers run with the runc at
// runcPath, the cgroupfs cgroup manager, no network namespace set-up
// (netns "none"), k8s-file logs, file events and nofile/nproc limits of
// 1024 (what works on cgroup v1 hybrid hosts without CAP_SYS_RESOURCE), its
// overlay storage under dir.
func WritePodmanConfig(dir, runcPath string) (*PodmanConfig, error) {
	c := &PodmanConfig{
		Dir:                dir,
		ConfPath:           filepath.Join(dir, "containers.conf"),
		StorageConfPath:    filepath.Join(dir, "storage.conf"),
		RegistriesConfPath: filepath.Join(dir, "registries.conf"),
		Root:               filepath.Join(dir, "root"),
		RunRoot:            filepath.Join(dir, "runroot"),
	}
	conf := fmt.Sprintf(`[containers]
netns = "none"
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = %q
tmp_dir = %q
volume_path = %q
static_dir = %q

[engine.runtimes]
runc = [%q]

[network]
network_config_dir = %q
`, filepath.Join(dir, "events.log"), filepath.Join(dir, "tmp"), filepath.Join(dir, "volumes"),
		filepath.Join(c.Root, "libpod"), runcPath, filepath.Join(dir, "net.d"))
	storage := fmt.Sprintf(`[storage]
driver = "overlay"
graphroot = %q
runroot = %q
`, c.Root, c.RunRoot)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	for _, f := range []struct{ path, data string }{
		{c.ConfPath, conf},
		{c.StorageConfPath, storage},
		{c.RegistriesConfPath, "unqualified-search-registries = []\n"},
	} {
		if err := os.WriteFile(f.path, []byte(f.data), 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return c, nil
}

// Args are the global podman flags that select the private storage
// (--root, --runroot).
func (c *PodmanConfig) Args() []string {
	return []string{"--root", c.Root, "--runroot", c.RunRoot}
}

// Env is the environment that points podman at the configuration files
// (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF, CONTAINERS_REGISTRIES_CONF).
// It has no PATH: the caller adds the one it wants.
func (c *PodmanConfig) Env() []string {
	return []string{
		"CONTAINERS_CONF=" + c.ConfPath,
		"CONTAINERS_STORAGE_CONF=" + c.StorageConfPath,
		"CONTAINERS_REGISTRIES_CONF=" + c.RegistriesConfPath,
	}
}
