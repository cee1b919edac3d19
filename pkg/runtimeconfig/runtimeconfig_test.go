package runtimeconfig

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

// tree is a set of files relative to a test root; content "" with absent
// true means the file must not exist.
type files map[string]string

func writeFiles(t *testing.T, root string, fs files) {
	t.Helper()
	for rel, content := range fs {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// snapshot returns every regular file under root with its content.
func snapshot(t *testing.T, root string) files {
	t.Helper()
	out := files{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
		return nil
	}))
	return out
}

const containerdV2Main = `# Site containerd config: comments must survive.
version = 2
root = "/var/lib/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"   # pinned
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
`

const containerdV3Main = `version = 3

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = true
`

const dockerDaemon = `{
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m", "max-file": "3"},
  "max-concurrent-downloads": 10,
  "registry-mirrors": ["https://mirror.example"],
  "runtimes": {"kata": {"path": "/usr/bin/kata-runtime", "runtimeArgs": ["--debug"]}},
  "features": {"buildkit": true},
  "shutdown-timeout": 1.5e1
}
`

func TestConfigureGoldenRoundTrip(t *testing.T) {
	tests := []struct {
		description string
		engine      Engine
		initial     files
		opts        func(root string) []Option
	}{
		{
			description: "containerd-v2-cdi-default",
			engine:      Containerd,
			initial:     files{"etc/containerd/config.toml": containerdV2Main},
			opts: func(root string) []Option {
				return []Option{WithCDI(true), WithSetAsDefault(true)}
			},
		},
		{
			description: "containerd-v2-runtime-only",
			engine:      Containerd,
			initial:     files{"etc/containerd/config.toml": containerdV2Main},
		},
		{
			// Debian's containerd 1.6 package: no runtimes table, so the
			// drop-in carries the built-in runc entry it would replace.
			description: "containerd-v2-debian-package",
			engine:      Containerd,
			initial: files{"etc/containerd/config.toml": "version = 2\n\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n" +
				"    [plugins.\"io.containerd.grpc.v1.cri\".cni]\n      bin_dir = \"/usr/lib/cni\"\n      conf_dir = \"/etc/cni/net.d\"\n" +
				"  [plugins.\"io.containerd.internal.v1.opt\"]\n    path = \"/var/lib/containerd/opt\"\n"},
			opts: func(string) []Option { return []Option{WithSetAsDefault(true)} },
		},
		{
			description: "containerd-v3-cdi",
			engine:      Containerd,
			initial:     files{"etc/containerd/config.toml": containerdV3Main},
			opts:        func(string) []Option { return []Option{WithCDI(true)} },
		},
		{
			description: "containerd-v3-missing-main",
			engine:      Containerd,
			initial:     files{},
			opts: func(string) []Option {
				return []Option{WithContainerdConfigVersion(3), WithCDI(true), WithSetAsDefault(true)}
			},
		},
		{
			description: "containerd-v3-existing-imports",
			engine:      Containerd,
			initial: files{"etc/containerd/config.toml": "version = 3\nimports = ['/etc/containerd/site.toml']\n\n" +
				"[plugins.'io.containerd.cri.v1.runtime']\n  enable_selinux = false\n", "etc/containerd/site.toml": "version = 3\n"},
		},
		{
			description: "crio-dropin-cdi-default",
			engine:      CRIO,
			initial:     files{"etc/crio/crio.conf": "[crio.runtime]\ndefault_runtime = \"runc\"\n"},
			opts:        func(string) []Option { return []Option{WithCDI(true), WithSetAsDefault(true)} },
		},
		{
			description: "crio-main-in-place",
			engine:      CRIO,
			initial: files{"etc/crio/crio.conf": "[crio]\n  log_dir = \"/var/log/crio/pods\"\n[crio.runtime]\n  default_runtime = \"runc\"\n" +
				"  [crio.runtime.runtimes.runc]\n    runtime_path = \"/usr/bin/runc\"\n    runtime_type = \"oci\"\n"},
			opts: func(string) []Option { return []Option{WithoutDropIn(), WithCDI(true)} },
		},
		{
			description: "podman-dropin-default",
			engine:      Podman,
			initial:     files{},
			opts:        func(string) []Option { return []Option{WithSetAsDefault(true), WithCDI(true)} },
		},
		{
			description: "podman-main-in-place",
			engine:      Podman,
			initial:     files{"etc/containers/containers.conf": "[engine]\ncgroup_manager = \"cgroupfs\"\n[engine.runtimes]\nrunc = [\"/usr/sbin/runc\"]\n"},
			opts:        func(string) []Option { return []Option{WithoutDropIn()} },
		},
		{
			description: "docker-existing-cdi-default",
			engine:      Docker,
			initial:     files{"etc/docker/daemon.json": dockerDaemon},
			opts:        func(string) []Option { return []Option{WithCDI(true), WithSetAsDefault(true)} },
		},
		{
			description: "docker-missing",
			engine:      Docker,
			initial:     files{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.initial)
			before := snapshot(t, root)
			opts := rootedPaths(tc.engine, root)
			if tc.opts != nil {
				opts = append(opts, tc.opts(root)...)
			}
			c, err := New(tc.engine, opts...)
			require.NoError(t, err)

			plan, err := c.Configure()
			require.NoError(t, err)
			require.True(t, plan.Changed())
			require.NoError(t, plan.Apply())
			after := snapshot(t, root)

			// Golden: every file that changed, with the temp root masked.
			var changed []string
			for rel, content := range after {
				if old, ok := before[rel]; !ok || old != content {
					changed = append(changed, rel)
				}
			}
			sort.Strings(changed)
			var golden bytes.Buffer
			for _, rel := range changed {
				golden.WriteString("### " + rel + "\n")
				golden.WriteString(strings.ReplaceAll(after[rel], root, "/ROOT"))
			}
			testutil.Golden(t, tc.description+".golden", golden.Bytes())

			// Idempotent: a second run plans no change and writes nothing.
			again, err := c.Configure()
			require.NoError(t, err)
			require.False(t, again.Changed(), "second configure must change nothing")
			require.NoError(t, again.Apply())
			require.Equal(t, after, snapshot(t, root))

			// Revert returns the original bytes (and removes created files).
			rev, err := c.Revert()
			require.NoError(t, err)
			require.NoError(t, rev.Apply())
			require.Equal(t, before, snapshot(t, root))

			// Reverting twice is a no-op.
			rev2, err := c.Revert()
			require.NoError(t, err)
			require.False(t, rev2.Changed())
		})
	}
}

// rootedPaths points every path at root.
func rootedPaths(e Engine, root string) []Option {
	var main, drop string
	switch e {
	case Containerd:
		main, drop = DefaultContainerdConfig, DefaultContainerdDropIn
	case CRIO:
		main, drop = DefaultCRIOConfig, DefaultCRIODropIn
	case Podman:
		main, drop = DefaultPodmanConfig, DefaultPodmanDropIn
	case Docker:
		return []Option{WithConfigPath(filepath.Join(root, DefaultDockerConfig))}
	}
	return []Option{WithConfigPath(filepath.Join(root, main)), WithDropInPath(filepath.Join(root, drop))}
}
