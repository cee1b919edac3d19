package runtime

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
)

// runApp runs `xpu-cdi runtime configure args...` and returns its stdout.
func runApp(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, _, err := clitest.Run(t, NewCommand, append([]string{"runtime", "configure"}, args...)...)
	return out, err
}

func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	}))
	return out
}

func TestConfigureCommand(t *testing.T) {
	root := t.TempDir()
	cfg := filepath.Join(root, "daemon.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"debug": true}`), 0o644))
	before := tree(t, root)

	out, err := runApp(t, "--runtime", "docker", "--mode", "shim", "--config", cfg, "--set-as-default", "--dry-run")
	require.NoError(t, err)
	require.Contains(t, out, "# would write "+cfg)
	require.Contains(t, out, `"default-runtime": "xpu"`)
	require.Equal(t, before, tree(t, root), "--dry-run must write nothing")

	out, err = runApp(t, "--runtime", "docker", "--mode", "shim", "--config", cfg, "--set-as-default")
	require.NoError(t, err)
	require.Contains(t, out, "updated "+cfg)

	out, err = runApp(t, "--runtime", "docker", "--mode", "shim", "--config", cfg, "--set-as-default")
	require.NoError(t, err)
	require.Contains(t, out, "already configured")

	out, err = runApp(t, "--runtime", "docker", "--mode", "shim", "--config", cfg, "--revert")
	require.NoError(t, err)
	require.Contains(t, out, "updated "+cfg)
	require.Equal(t, before, tree(t, root))
}

func TestConfigureEnvVars(t *testing.T) {
	root := t.TempDir()
	drop := filepath.Join(root, "d", "99-xpu.conf")
	t.Setenv("XPU_CDI_RUNTIME", "podman")
	t.Setenv("XPU_CDI_RUNTIME_DROP_IN_FILE", drop)
	t.Setenv("XPU_CDI_RUNTIME_NAME", "xpu2")
	t.Setenv("XPU_CDI_RUNTIME_PATH", "/opt/x/shim")
	_, err := runApp(t)
	require.NoError(t, err)
	b, err := os.ReadFile(drop)
	require.NoError(t, err)
	require.Contains(t, string(b), "xpu2 = ['/opt/x/shim']")
}

func TestConfigureErrors(t *testing.T) {
	root := t.TempDir()
	bad := filepath.Join(root, "config.toml")
	require.NoError(t, os.WriteFile(bad, []byte("version = 2\n[plugins\n"), 0o644))
	tests := []struct {
		description string
		args        []string
		want        string
	}{
		{"unknown runtime", []string{"--runtime", "rkt"}, "want one of"},
		{"contradicting flags", []string{"--runtime", "podman", "--no-drop-in", "--drop-in-file", "/x"}, "contradict"},
		{"broken file", []string{"--runtime", "containerd", "--config", bad, "--drop-in-file", filepath.Join(root, "d.toml")}, bad},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := runApp(t, tc.args...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestHelpNamesEveryFlagAndEnvVar(t *testing.T) {
	cmd := newConfigureCommand(nil)
	for _, f := range cmd.Flags {
		df, ok := f.(cli.DocGenerationFlag)
		require.True(t, ok)
		require.NotEmpty(t, df.GetUsage(), "flag %v has no usage", f.Names())
		envs := df.GetEnvVars()
		require.Len(t, envs, 1, "flag %v", f.Names())
		require.True(t, strings.HasPrefix(envs[0], "XPU_CDI_"), "flag %v env %v", f.Names(), envs)
	}
}

func TestContainerdVersionRegexp(t *testing.T) {
	for out, want := range map[string]string{
		"containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n": "1",
		"containerd github.com/containerd/containerd/v2 v2.4.2 abcdef\n":                "2",
		"containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da\n":    "1",
	} {
		m := containerdVersionRE.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		require.Equal(t, want, m[1], out)
	}
}
