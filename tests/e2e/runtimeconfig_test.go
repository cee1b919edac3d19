package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/runtimeconfig"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

func lookupKey(t *testing.T, tree map[string]any, key ...string) any {
	t.Helper()
	var cur any = tree
	for i, k := range key {
		m, ok := cur.(map[string]any)
		require.True(t, ok, "%s is not a table", strings.Join(key[:i], "."))
		cur, ok = m[k]
		require.True(t, ok, "%s missing", strings.Join(key[:i+1], "."))
	}
	return cur
}

// containerd 2.x, and Debian's containerd 1.6 for a version 2 main file,
// load the produced main file and drop-in: `containerd config dump` (the
// merged effective config) shows the runtime, the default and (2.x) the CDI
// directories, the runtime's container_annotations = ["cdi.k8s.io/*"] where
// the CRI plugin does not resolve CDI itself, and no pod annotation forwarded, keeps what the main file set, and logs no
// unknown-key warning.
func TestRuntimeConfigContainerdConfigDump(t *testing.T) {
	harness.RequiresRoot(t)
	containerd2 := harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "containerd"))
	containerd16 := harness.RequiresTool(t, harness.Containerd16Bin)
	const v2Main = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n"
	tests := []struct {
		description string
		containerd  string
		main        string // "" = no main file
		version     int
		// plugin is the CRI runtime plugin in the dump: containerd 2.x
		// shows a version 2 file migrated to version 3.
		plugin string
		// cdi: containerd 1.6 has no CDI keys.
		cdi bool
	}{
		// Debian's containerd 1.6 package ships this file, which relies on
		// the built-in runc runtime that the drop-in's table replaces.
		{"containerd 1.6, Debian's packaged main", containerd16, "version = 2\n\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n" +
			"    [plugins.\"io.containerd.grpc.v1.cri\".cni]\n      bin_dir = \"/usr/lib/cni\"\n      conf_dir = \"/etc/cni/net.d\"\n" +
			"  [plugins.\"io.containerd.internal.v1.opt\"]\n    path = \"/var/lib/containerd/opt\"\n", 0, "io.containerd.grpc.v1.cri", false},
		{"version 3 main", containerd2, "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  SystemdCgroup = true\n", 0, "io.containerd.cri.v1.runtime", true},
		{"version 2 main", containerd2, v2Main, 0, "io.containerd.cri.v1.runtime", true},
		{"no main", containerd2, "", 3, "io.containerd.cri.v1.runtime", true},
		{"containerd 1.6, version 2 main", containerd16, v2Main, 0, "io.containerd.grpc.v1.cri", false},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			containerd := tc.containerd
			dir := t.TempDir()
			mainPath := filepath.Join(dir, "config.toml")
			if tc.main != "" {
				require.NoError(t, os.WriteFile(mainPath, []byte(tc.main), 0o644))
			}
			shim := filepath.Join(dir, "bin", "xpu-container-runtime")
			c, err := runtimeconfig.New(runtimeconfig.Containerd,
				runtimeconfig.WithConfigPath(mainPath),
				runtimeconfig.WithDropInPath(filepath.Join(dir, "conf.d", "99-xpu.toml")),
				runtimeconfig.WithRuntimePath(shim),
				runtimeconfig.WithSetAsDefault(true), runtimeconfig.WithCDI(tc.cdi),
				runtimeconfig.WithContainerdConfigVersion(tc.version))
			require.NoError(t, err)
			plan, err := c.Configure()
			require.NoError(t, err)
			require.NoError(t, plan.Apply())

			var stdout, stderr bytes.Buffer
			cmd := exec.Command(containerd, "--config", mainPath, "config", "dump")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), stderr.String())
			require.NotContains(t, stderr.String(), "unknown key", "containerd ignored a key we wrote")

			dump := map[string]any{}
			require.NoError(t, toml.Unmarshal(stdout.Bytes(), &dump))
			cri := []string{"plugins", tc.plugin}
			rt := append(append([]string{}, cri...), "containerd", "runtimes")
			require.Equal(t, shim, lookupKey(t, dump, append(rt, "xpu", "options", "BinaryName")...))
			require.Equal(t, "io.containerd.runc.v2", lookupKey(t, dump, append(rt, "xpu", "runtime_type")...))
			if tc.cdi {
				// The CRI plugin resolves CDI itself: forwarding the
				// annotations would make the shim apply the edits again.
				if ann, ok := lookupKey(t, dump, append(rt, "xpu")...).(map[string]any)["container_annotations"]; ok {
					require.Empty(t, ann, "no container annotation may be forwarded")
				}
			} else {
				require.Equal(t, []any{"cdi.k8s.io/*"}, lookupKey(t, dump, append(rt, "xpu", "container_annotations")...),
					"the CRI plugin must pass cdi.k8s.io container annotations to the shim")
			}
			if pod, ok := lookupKey(t, dump, append(rt, "xpu")...).(map[string]any)["pod_annotations"]; ok {
				require.Empty(t, pod, "pod annotations must never be forwarded")
			}
			require.Equal(t, "xpu", lookupKey(t, dump, append(cri, "containerd", "default_runtime_name")...))
			if !strings.Contains(tc.main, "runtimes.runc") {
				require.Equal(t, "io.containerd.runc.v2", lookupKey(t, dump, append(rt, "runc", "runtime_type")...),
					"the built-in runc runtime must survive the drop-in")
			}
			if tc.cdi {
				require.Equal(t, []any{"/etc/cdi", "/var/run/cdi"}, lookupKey(t, dump, append(cri, "cdi_spec_dirs")...))
			}
			if strings.Contains(tc.main, "SystemdCgroup") {
				require.Equal(t, true, lookupKey(t, dump, append(rt, "runc", "options", "SystemdCgroup")...),
					"the main file's runc setting must survive the drop-in")
			}

			// Revert: containerd no longer knows the runtime.
			rev, err := c.Revert()
			require.NoError(t, err)
			require.NoError(t, rev.Apply())
			if tc.main == "" {
				require.NoFileExists(t, mainPath)
				return
			}
			out, err := exec.Command(containerd, "--config", mainPath, "config", "dump").Output()
			require.NoError(t, err)
			require.NotContains(t, string(out), shim)
		})
	}
}

// Podman 4.3 with the produced configuration runs `--runtime xpu` through
// the registered path (a symlink to runc standing in for the shim). The
// unconfigured file is tried first: Podman must not know the name then.
func TestRuntimeConfigPodmanKnowsRuntime(t *testing.T) {
	harness.RequiresRoot(t)
	podman := harness.RequiresTool(t, "podman")
	runc := harness.RequiresTool(t, "runc")
	// Podman refuses a runroot longer than 50 characters: t.TempDir() is
	// too long.
	dir := testutil.ShortDir(t, "xpu-pm")
	shim := filepath.Join(dir, "xpu-container-runtime")
	require.NoError(t, os.Symlink(runc, shim))
	conf := filepath.Join(dir, "containers.conf")
	require.NoError(t, os.WriteFile(conf, []byte("[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n"), 0o644))

	info := func() (string, error) {
		// vfs: the overlay driver leaves a mount of its own below the
		// root, which outlives the test's temporary directory.
		cmd := exec.Command(podman, "--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs",
			"--runtime", "xpu", "info", "--format", "{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Path}}")
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := info()
	require.Error(t, err, "podman must not know runtime xpu before configure")
	require.Contains(t, out, "xpu", "the failure must be about the unknown runtime: %s", out)

	// CONTAINERS_CONF names one file and Podman 4.3 reads no drop-in next to
	// it, so the in-place mode is what can be pointed at a temp dir.
	c, err := runtimeconfig.New(runtimeconfig.Podman, runtimeconfig.WithConfigPath(conf),
		runtimeconfig.WithoutDropIn(), runtimeconfig.WithRuntimePath(shim))
	require.NoError(t, err)
	plan, err := c.Configure()
	require.NoError(t, err)
	require.NoError(t, plan.Apply())
	out, err = info()
	require.NoError(t, err, out)
	require.Equal(t, "xpu "+shim, out)

	rev, err := c.Revert()
	require.NoError(t, err)
	require.NoError(t, rev.Apply())
	out, err = info()
	require.Error(t, err, "podman must not know runtime xpu after revert")
	require.Contains(t, out, "xpu", out)
}
