package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"
)

func TestWritePodmanConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "podman")
	const runc = "/usr/sbin/runc"
	c, err := WritePodmanConfig(dir, runc)
	require.NoError(t, err)
	require.Equal(t, []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "runroot")}, c.Args())
	require.Equal(t, []string{
		"CONTAINERS_CONF=" + filepath.Join(dir, "containers.conf"),
		"CONTAINERS_STORAGE_CONF=" + filepath.Join(dir, "storage.conf"),
		"CONTAINERS_REGISTRIES_CONF=" + filepath.Join(dir, "registries.conf"),
	}, c.Env())

	var conf struct {
		Containers struct {
			Netns          string   `toml:"netns"`
			DefaultUlimits []string `toml:"default_ulimits"`
			LogDriver      string   `toml:"log_driver"`
		} `toml:"containers"`
		Engine struct {
			Runtime       string              `toml:"runtime"`
			CgroupManager string              `toml:"cgroup_manager"`
			EventsLogger  string              `toml:"events_logger"`
			EventsLogfile string              `toml:"events_logfile_path"`
			TmpDir        string              `toml:"tmp_dir"`
			VolumePath    string              `toml:"volume_path"`
			StaticDir     string              `toml:"static_dir"`
			Runtimes      map[string][]string `toml:"runtimes"`
		} `toml:"engine"`
		Network struct {
			ConfigDir string `toml:"network_config_dir"`
		} `toml:"network"`
	}
	var storage struct {
		Storage struct {
			Driver    string `toml:"driver"`
			GraphRoot string `toml:"graphroot"`
			RunRoot   string `toml:"runroot"`
		} `toml:"storage"`
	}
	var registries struct {
		Unqualified []string `toml:"unqualified-search-registries"`
	}
	for _, tc := range []struct {
		path string
		into any
	}{
		{c.ConfPath, &conf},
		{c.StorageConfPath, &storage},
		{c.RegistriesConfPath, &registries},
	} {
		data, err := os.ReadFile(tc.path)
		require.NoError(t, err)
		require.NoError(t, toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(tc.into), tc.path)
	}

	require.Equal(t, "none", conf.Containers.Netns)
	require.Equal(t, []string{"nofile=1024:1024", "nproc=1024:1024"}, conf.Containers.DefaultUlimits)
	require.Equal(t, "k8s-file", conf.Containers.LogDriver)
	require.Equal(t, "runc", conf.Engine.Runtime)
	require.Equal(t, map[string][]string{"runc": {runc}}, conf.Engine.Runtimes)
	require.Equal(t, "cgroupfs", conf.Engine.CgroupManager)
	require.Equal(t, "file", conf.Engine.EventsLogger)
	for _, p := range []string{conf.Engine.EventsLogfile, conf.Engine.TmpDir, conf.Engine.VolumePath, conf.Engine.StaticDir, conf.Network.ConfigDir} {
		rel, err := filepath.Rel(dir, p)
		require.NoError(t, err)
		require.True(t, filepath.IsLocal(rel), "%s is under %s", p, dir)
	}
	require.Equal(t, "overlay", storage.Storage.Driver)
	require.Equal(t, c.Root, storage.Storage.GraphRoot)
	require.Equal(t, c.RunRoot, storage.Storage.RunRoot)
	require.NotNil(t, registries.Unqualified)
	require.Empty(t, registries.Unqualified)
}

func TestWritePodmanConfigError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err := WritePodmanConfig(filepath.Join(file, "podman"), "/usr/sbin/runc")
	require.Error(t, err)
}
