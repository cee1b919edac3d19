package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/xpurequest"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// These tests start real engines with the configuration files produced by
// the xpu-cdi binary (`xpu-cdi runtime configure`, run on the engine's own
// base configuration in the harness's private directory) and run containers
// through the registered runtime "xpu": the shim wrapper of shimRuntime, in
// jit mode on a fake P800 host. A container proves the shim ran by what
// only the shim gives it: the fake host's /dev/xpu* nodes (with their
// major:minor) and the XPU_CDI_DEVICE_<n> variables of the devices asked for.

// configureRuntime runs `xpu-cdi runtime configure` with args and returns
// its stdout.
func configureRuntime(t testing.TB, args ...string) string {
	t.Helper()
	return XPUCDI(t, append([]string{"runtime", "configure"}, args...)...)
}

// requireShimLogged checks that the shim's log file has grown since size
// (the shim wrote at least one decision), and returns its new size.
func requireShimLogged(t *testing.T, logFile string, size int64) int64 {
	t.Helper()
	fi, err := os.Stat(logFile)
	require.NoError(t, err, "the shim never wrote its log: it did not run")
	require.Greater(t, fi.Size(), size, "the shim wrote nothing to %s: it did not run", logFile)
	return fi.Size()
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return fi.Size()
}

// criRun runs one pod with one container through crictl with runtime
// handler handler ("" for the default runtime): the container runs
// listXPUs with the device plugin's volume-mounts answer for ids (what the
// shim grants from on every CRI engine), and criRun returns its log once it
// has exited 0. The pod is removed afterwards.
func criRun(t *testing.T, cri harness.CRI, image, handler, name string, ids ...string) string {
	t.Helper()
	return harness.CRIRunToCompletion(t, cri, harness.CRIContainer{
		Name: name, Image: image, Command: []string{"sh", "-c", listXPUs},
		Mounts: deviceMounts(ids...), RuntimeHandler: handler,
	})
}

// deviceMounts is the device plugin's volume-mounts answer for ids.
func deviceMounts(ids ...string) []harness.CRIMount {
	out := make([]harness.CRIMount, 0, len(ids))
	for _, id := range ids {
		out = append(out, harness.CRIMount{ContainerPath: xpurequest.MountDir + "/" + id, HostPath: xpurequest.MountSource, ReadOnly: true})
	}
	return out
}

// TestRuntimeConfigContainerdRunsShim: containerd 2.x started with the main
// file and the conf.d drop-in produced by `xpu-cdi runtime configure
// --cdi.enabled` runs a CRI container with runtime handler "xpu" through the
// shim; with --set-as-default a container without a handler goes through
// the shim too; after --revert the handler is gone.
func TestRuntimeConfigContainerdRunsShim(t *testing.T) {
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	tree := FakeHost(t, fakehost.P800x8())
	xpu, logFile := shimRuntime(t, tree, "")
	var mainPath, dropIn string
	var configureArgs []string
	c := harness.NewContainerd(t, harness.WithConfigEdit(func(t testing.TB, path string) {
		mainPath = path
		dropIn = filepath.Join(filepath.Dir(path), "conf.d", "99-xpu.toml")
		configureArgs = []string{
			"--runtime", "containerd", "--config", mainPath, "--drop-in-file", dropIn,
			"--runtime-path", xpu, "--cdi.enabled",
		}
		configureRuntime(t, configureArgs...)
	}))
	main, err := os.ReadFile(mainPath)
	require.NoError(t, err)
	var imports struct{ Imports []string }
	require.NoError(t, toml.Unmarshal(main, &imports))
	require.Equal(t, []string{dropIn}, imports.Imports, "the main file must import the drop-in")
	require.FileExists(t, dropIn)

	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	c.ImportImage(t, rootfs, harness.CRISandboxImage,
		harness.WithImageNamespace(harness.CRINamespace), harness.WithImageCmd("sleep", "2147483647"))
	image := c.ImportImage(t, rootfs, "xpu-e2e-busybox", harness.WithImageNamespace(harness.CRINamespace))
	wantNodes, wantEnv := expectWithVisible(tree, 0)

	t.Run("handler xpu goes through the shim", func(t *testing.T) {
		size := fileSize(t, logFile)
		nodes, env := parseNodes(t, criRun(t, c, image, "xpu", "xpu-handler", "0"))
		require.Equal(t, wantNodes, nodes)
		require.Equal(t, wantEnv, env)
		requireShimLogged(t, logFile, size)
	})

	t.Run("handler runc does not", func(t *testing.T) {
		size := fileSize(t, logFile)
		nodes, env := parseNodes(t, criRun(t, c, image, "runc", "xpu-runc", "0"))
		require.Empty(t, nodes, "runc must not give XPUs: the nodes above came from the shim")
		require.Empty(t, env)
		require.Equal(t, size, fileSize(t, logFile), "the shim ran for runtime handler runc")
	})

	t.Run("set as default", func(t *testing.T) {
		// The drop-in is regenerated from the flags; containerd reads it
		// again when it restarts.
		configureRuntime(t, append(configureArgs, "--set-as-default")...)
		c.Restart(t)
		size := fileSize(t, logFile)
		nodes, env := parseNodes(t, criRun(t, c, image, "", "xpu-default", "0"))
		require.Equal(t, wantNodes, nodes)
		require.Equal(t, wantEnv, env)
		requireShimLogged(t, logFile, size)
	})

	t.Run("revert", func(t *testing.T) {
		configureRuntime(t, append(configureArgs, "--revert")...)
		require.NoFileExists(t, dropIn)
		after, err := os.ReadFile(mainPath)
		require.NoError(t, err)
		require.NotContains(t, string(after), "imports")
		c.Restart(t)
		nodes, _ := parseNodes(t, criRun(t, c, image, "", "xpu-reverted", "0"))
		require.Empty(t, nodes, "the default runtime is runc again")
		r := c.Crictl(t, "runp", "--runtime", "xpu", writePodConfig(t, "xpu-unknown"))
		require.NotZero(t, r.ExitCode, r.String())
		require.Contains(t, r.Stderr, `no runtime for \"xpu\" is configured`, r.String())
	})
}

// writePodConfig writes a minimal host-network pod config for crictl runp.
func writePodConfig(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pod.json")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`{
  "metadata": {"name": %q, "namespace": "default", "uid": %q, "attempt": 0},
  "linux": {"security_context": {"namespace_options": {"network": 2}}}
}`, name, name+"-uid")), 0o644))
	return path
}

// TestRuntimeConfigDockerRunsShim: dockerd 20.10 restarted with the
// daemon.json produced by `xpu-cdi runtime configure --runtime docker` from
// a base file with other keys runs `docker run --runtime xpu` through the
// shim, keeps the other keys, and after --revert the file is the base byte
// for byte and a restarted dockerd no longer knows the runtime.
func TestRuntimeConfigDockerRunsShim(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	xpu, logFile := shimRuntime(t, tree, "")
	runc := harness.RequiresTool(t, "runc")
	d := harness.NewDockerd(t, map[string]any{
		"labels":                   []string{"xpu-e2e=base"},
		"max-concurrent-downloads": 7,
		"runtimes":                 map[string]any{"runc-alias": map[string]any{"path": runc}},
		"default-ulimits":          map[string]any{"nofile": map[string]any{"Name": "nofile", "Hard": 4096, "Soft": 2048}},
	})
	base, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	image := d.ImportImage(t, rootfs, "xpu-e2e-busybox")
	run := []string{"run", "--rm", "--runtime", "xpu", "--device-cgroup-rule", "a *:* rwm", "-e", "XPU_VISIBLE_DEVICES=0,3", image, "sh", "-c", listXPUs}

	r := d.Docker(t, run...)
	require.NotZero(t, r.ExitCode, "dockerd must not know runtime xpu before configure: %s", r)
	require.Contains(t, r.Stderr, "Unknown runtime specified xpu")

	// The mode comes from Debian 12's dockerd itself: 20.10 has no CDI.
	args := []string{"--runtime", "docker", "--config", d.ConfigPath, "--runtime-path", xpu, "--cdi.enabled", "--dockerd", harness.DockerdBin}
	out := configureRuntime(t, args...)
	require.Contains(t, out, "docker: mode shim (dockerd 20.10.")
	d.Restart(t)

	// The other keys reached the engine.
	info := d.MustDocker(t, "info", "--format", "{{json .Runtimes}} {{json .Labels}}").Stdout
	for _, want := range []string{`"xpu":{"path":"` + xpu + `"}`, `"runc-alias":{"path":"` + runc + `"}`, `["xpu-e2e=base"]`} {
		require.Contains(t, info, want)
	}
	configured := map[string]any{}
	data, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &configured))
	require.EqualValues(t, 7, configured["max-concurrent-downloads"])
	require.Contains(t, configured, "default-ulimits")

	size := fileSize(t, logFile)
	nodes, env := parseNodes(t, d.MustDocker(t, run...).Stdout)
	wantNodes, wantEnv := expectWithVisible(tree, 0, 3)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)
	requireShimLogged(t, logFile, size)
	soft := d.MustDocker(t, "run", "--rm", "--runtime", "xpu", image, "sh", "-c", "ulimit -n").Stdout
	require.Equal(t, "2048\n", soft, "default-ulimits from the base file must still apply")

	configureRuntime(t, append(args, "--revert")...)
	reverted, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	require.Equal(t, string(base), string(reverted), "revert must give back the base daemon.json byte for byte")
	leftovers, err := filepath.Glob(d.ConfigPath + ".*")
	require.NoError(t, err)
	require.Empty(t, leftovers, "revert left files next to daemon.json")
	d.Restart(t)
	r = d.Docker(t, run...)
	require.NotZero(t, r.ExitCode, "a restarted dockerd must not know runtime xpu after revert: %s", r)
	require.Contains(t, r.Stderr, "Unknown runtime specified xpu")
}

// TestRuntimeConfigPodmanRunsShim: Podman 4.3 with the containers.conf
// produced in place (CONTAINERS_CONF names one file and Podman 4.3 reads no
// drop-in next to it) runs `--runtime xpu` through the shim.
func TestRuntimeConfigPodmanRunsShim(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	xpu, logFile := shimRuntime(t, tree, "")
	p := harness.NewPodman(t)
	base, err := os.ReadFile(p.ConfPath)
	require.NoError(t, err)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	image := p.ImportImage(t, rootfs, "xpu-e2e-busybox")
	run := []string{"run", "--rm", "--runtime", "xpu", "--device-cgroup-rule", "a *:* rwm", "-e", "XPU_VISIBLE_DEVICES=1", image, "sh", "-c", listXPUs}

	args := []string{"--runtime", "podman", "--config", p.ConfPath, "--no-drop-in", "--runtime-path", xpu}
	configureRuntime(t, args...)
	size := fileSize(t, logFile)
	nodes, env := parseNodes(t, p.MustRun(t, run...).Stdout)
	wantNodes, wantEnv := expectWithVisible(tree, 1)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)
	requireShimLogged(t, logFile, size)

	configureRuntime(t, append(args, "--revert")...)
	reverted, err := os.ReadFile(p.ConfPath)
	require.NoError(t, err)
	require.Equal(t, string(base), string(reverted), "revert must give back the base containers.conf byte for byte")
	r := p.Run(t, run...)
	require.NotZero(t, r.ExitCode, "podman must not know runtime xpu after revert: %s", r)
	require.Contains(t, r.Stderr, `OCI runtime "xpu" not found`, r.String())
}
