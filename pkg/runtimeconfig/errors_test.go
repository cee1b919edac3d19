package runtimeconfig

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"
)

func TestBrokenFilesRefusedUntouched(t *testing.T) {
	tests := []struct {
		description string
		engine      Engine
		rel         string
		content     string
		extra       []Option
		wantErr     error
	}{
		{"containerd main not TOML", Containerd, "etc/containerd/config.toml", "version = 2\n[plugins\n", nil, ErrParse},
		{"containerd main version 1", Containerd, "etc/containerd/config.toml", "[plugins.cri]\nx = 1\n", nil, ErrUnsupportedVersion},
		{"containerd main version 4", Containerd, "etc/containerd/config.toml", "version = 4\n", nil, ErrUnsupportedVersion},
		{"containerd imports not an array", Containerd, "etc/containerd/config.toml", "version = 2\nimports = 'x'\n", nil, ErrParse},
		{"containerd drop-in not ours", Containerd, "etc/containerd/conf.d/99-xpu.toml", "version = 2\n", []Option{WithContainerdConfigVersion(2)}, ErrNotOurs},
		{"docker not JSON", Docker, "etc/docker/daemon.json", "{\"runtimes\": {\n", nil, ErrParse},
		{"docker two values", Docker, "etc/docker/daemon.json", "{} {}", nil, ErrParse},
		{"crio drop-in not TOML", CRIO, "etc/crio/crio.conf.d/99-xpu.conf", "[crio.runtime\n", nil, ErrParse},
		{"crio main not TOML", CRIO, "etc/crio/crio.conf", "[crio.runtime\n", []Option{WithoutDropIn()}, ErrParse},
		{"podman drop-in not ours", Podman, "etc/containers/containers.conf.d/99-xpu.conf", "[engine]\n", nil, ErrNotOurs},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, files{tc.rel: tc.content})
			before := snapshot(t, root)
			c, err := New(tc.engine, append(rootedPaths(tc.engine, root), tc.extra...)...)
			require.NoError(t, err)
			_, err = c.Configure()
			require.ErrorIs(t, err, tc.wantErr)
			require.Contains(t, err.Error(), filepath.Join(root, tc.rel), "error must name the file")
			// Revert either refuses or finds nothing of ours: it must
			// not touch a foreign or broken file either.
			if rev, err := c.Revert(); err == nil {
				require.NoError(t, rev.Apply())
			}
			require.Equal(t, before, snapshot(t, root), "files must be untouched")
		})
	}
}

func TestContainerdMissingMainNeedsVersion(t *testing.T) {
	root := t.TempDir()
	c, err := New(Containerd, rootedPaths(Containerd, root)...)
	require.NoError(t, err)
	_, err = c.Configure()
	require.ErrorIs(t, err, ErrUnsupportedVersion)
	require.Contains(t, err.Error(), "--containerd-config-version")
}

func TestContainerdGlobImportAlreadyCovers(t *testing.T) {
	root := t.TempDir()
	main := "version = 2\nimports = [\"conf.d/*.toml\"]\n"
	writeFiles(t, root, files{"etc/containerd/config.toml": main})
	c, err := New(Containerd, rootedPaths(Containerd, root)...)
	require.NoError(t, err)
	p, err := c.Configure()
	require.NoError(t, err)
	require.NoError(t, p.Apply())
	got, err := os.ReadFile(filepath.Join(root, "etc/containerd/config.toml"))
	require.NoError(t, err)
	require.Equal(t, main, string(got), "a relative glob import already loads the drop-in: main must stay as it is")
	r, err := c.Revert()
	require.NoError(t, err)
	require.NoError(t, r.Apply())
	require.Equal(t, files{"etc/containerd/config.toml": main}, snapshot(t, root))
}

func TestModeAndOwnerKept(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "etc/docker/daemon.json")
	writeFiles(t, root, files{"etc/docker/daemon.json": "{}"})
	require.NoError(t, os.Chmod(p, 0o600))
	wantUID, wantGID := os.Getuid(), os.Getgid()
	if os.Geteuid() == 0 {
		wantUID, wantGID = 4321, 8765
		require.NoError(t, os.Chown(p, wantUID, wantGID))
	}
	c, err := New(Docker, rootedPaths(Docker, root)...)
	require.NoError(t, err)
	plan, err := c.Configure()
	require.NoError(t, err)
	require.NoError(t, plan.Apply())
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	st := fi.Sys().(*syscall.Stat_t)
	require.Equal(t, wantUID, int(st.Uid))
	require.Equal(t, wantGID, int(st.Gid))
	if os.Geteuid() != 0 {
		t.Log("not root: owner change not exercised (only mode)")
	}

	// New files and directories: 0644 and 0755.
	c2, err := New(Podman, rootedPaths(Podman, root)...)
	require.NoError(t, err)
	plan, err = c2.Configure()
	require.NoError(t, err)
	require.NoError(t, plan.Apply())
	fi, err = os.Stat(filepath.Join(root, DefaultPodmanDropIn))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(filepath.Join(root, DefaultPodmanDropIn)))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), di.Mode().Perm())
	left, _ := filepath.Glob(filepath.Join(root, "etc/*/.*xpu-cdi-*"))
	require.Empty(t, left, "no temporary files left behind")
}

func TestSymlinkRefused(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "elsewhere.json")
	require.NoError(t, os.WriteFile(target, []byte("{}"), 0o644))
	link := filepath.Join(root, "etc/docker/daemon.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
	require.NoError(t, os.Symlink(target, link))
	c, err := New(Docker, rootedPaths(Docker, root)...)
	require.NoError(t, err)
	_, err = c.Configure()
	require.ErrorIs(t, err, ErrSymlink)

	// A planted symlink at the drop-in path is refused too.
	drop := filepath.Join(root, DefaultPodmanDropIn)
	require.NoError(t, os.MkdirAll(filepath.Dir(drop), 0o755))
	require.NoError(t, os.Symlink(target, drop))
	c, err = New(Podman, rootedPaths(Podman, root)...)
	require.NoError(t, err)
	_, err = c.Configure()
	require.ErrorIs(t, err, ErrSymlink)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "{}", string(b))
}

func TestConcurrentEditDetected(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, files{"etc/docker/daemon.json": "{}"})
	c, err := New(Docker, rootedPaths(Docker, root)...)
	require.NoError(t, err)
	plan, err := c.Configure()
	require.NoError(t, err)
	writeFiles(t, root, files{"etc/docker/daemon.json": `{"debug": true}`})
	err = plan.Apply()
	require.True(t, errors.Is(err, ErrConcurrentEdit), "got %v", err)
}

// An admin edit after configure: revert restores only the keys that still
// hold what xpu-cdi set, and keeps the admin's change.
func TestDockerRevertAfterAdminEdit(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, files{"etc/docker/daemon.json": `{"default-runtime": "runc", "debug": false}`})
	c, err := New(Docker, append(rootedPaths(Docker, root), WithSetAsDefault(true), WithCDI(true))...)
	require.NoError(t, err)
	plan, err := c.Configure()
	require.NoError(t, err)
	require.NoError(t, plan.Apply())
	p := filepath.Join(root, "etc/docker/daemon.json")
	tree, err := parseJSON(p, mustRead(t, p))
	require.NoError(t, err)
	tree["debug"] = true
	tree["features"].(map[string]any)["cdi"] = false // admin turned CDI off again
	b, err := encodeJSON(tree)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, b, 0o644))

	rev, err := c.Revert()
	require.NoError(t, err)
	require.NoError(t, rev.Apply())
	got, err := parseJSON(p, mustRead(t, p))
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"default-runtime": "runc", // prior value restored
		"debug":           true,   // admin's edit kept
		"features":        map[string]any{"cdi": false},
	}, got)
	require.NoFileExists(t, p+recordSuffix)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return b
}

// crioRuntimeConfig mirrors the keys crio.conf(5) documents for the tables
// the drop-in writes, with their documented types. Decoding with
// DisallowUnknownFields fails on a misspelt key or a wrong type.
type crioRuntimeConfig struct {
	Crio struct {
		Runtime struct {
			DefaultRuntime string   `toml:"default_runtime"`
			CDISpecDirs    []string `toml:"cdi_spec_dirs"`
			Runtimes       map[string]struct {
				RuntimePath                  string   `toml:"runtime_path"`
				RuntimeType                  string   `toml:"runtime_type"`
				RuntimeRoot                  string   `toml:"runtime_root"`
				PrivilegedWithoutHostDevices bool     `toml:"privileged_without_host_devices"`
				AllowedAnnotations           []string `toml:"allowed_annotations"`
				MonitorPath                  string   `toml:"monitor_path"`
			} `toml:"runtimes"`
		} `toml:"runtime"`
	} `toml:"crio"`
}

func TestCRIODropInMatchesDocumentedSchema(t *testing.T) {
	root := t.TempDir()
	c, err := New(CRIO, append(rootedPaths(CRIO, root), WithCDI(true), WithSetAsDefault(true), WithRuntimeName("xpu-test"))...)
	require.NoError(t, err)
	plan, err := c.Configure()
	require.NoError(t, err)
	require.Len(t, plan.Changes, 1)
	var cfg crioRuntimeConfig
	dec := toml.NewDecoder(bytesReader(plan.Changes[0].New))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&cfg))
	rt := cfg.Crio.Runtime
	require.Equal(t, "xpu-test", rt.DefaultRuntime)
	require.Equal(t, DefaultCDISpecDirs, rt.CDISpecDirs)
	require.Contains(t, rt.Runtimes, "xpu-test")
	require.Equal(t, DefaultRuntimePath, rt.Runtimes["xpu-test"].RuntimePath)
	require.Contains(t, []string{"oci", "vm", "pod"}, rt.Runtimes["xpu-test"].RuntimeType)
	require.True(t, filepath.IsAbs(rt.Runtimes["xpu-test"].RuntimePath))
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		description string
		engine      Engine
		opts        []Option
	}{
		{"unknown engine", Engine("rkt"), nil},
		{"relative config", Docker, []Option{WithConfigPath("daemon.json")}},
		{"relative runtime path", Podman, []Option{WithRuntimePath("xpu-container-runtime")}},
		{"bad runtime name", CRIO, []Option{WithRuntimeName("x]y")}},
		{"docker drop-in", Docker, []Option{WithDropInPath("/etc/docker/x.json")}},
		{"containerd no drop-in", Containerd, []Option{WithoutDropIn()}},
		{"containerd version 1", Containerd, []Option{WithContainerdConfigVersion(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := New(tc.engine, tc.opts...)
			require.Error(t, err)
		})
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
