package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// shimRuntime writes a config.toml for xpu-container-runtime (jit mode on
// the fake host, runc as low-level runtime, the real hook, a spec cache in
// the test's directory, the device plugin's volume-mounts answer accepted
// from pods as a node using that strategy must have it) plus extra, whose
// keys replace those defaults, and
// returns an executable to give engines as their runtime: a two-line
// wrapper that points the shim at that config through
// XPU_CONTAINER_TOOLKIT_CONFIG (the engines' environment cannot be set per
// runtime; a real installation uses /etc/xpu-container-toolkit/config.toml).
func shimRuntime(t *testing.T, tree *fakehost.Tree, extra string) (wrapper, logFile string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	runc := harness.RequiresTool(t, "runc")
	logFile = filepath.Join(dir, "shim.log")
	defaults := [][2]string{
		{"mode", `"jit"`},
		{"spec-dirs", fmt.Sprintf("[%q]", filepath.Join(dir, "no-specs"))},
		{"dev-root", fmt.Sprintf("%q", tree.Root)},
		{"driver-root", fmt.Sprintf("%q", tree.Root)},
		{"hook-path", fmt.Sprintf("%q", Binary(t, "xpu-runtime-hook"))},
		{"log-file", fmt.Sprintf("%q", logFile)},
		{"log-level", `"debug"`},
		{"cache-dir", fmt.Sprintf("%q", filepath.Join(dir, "cache"))},
		{"low-level-runtimes", fmt.Sprintf("[%q]", runc)},
		{"accept-device-plugin-mounts", "true"},
	}
	cfg := extra
	if cfg != "" && !strings.HasSuffix(cfg, "\n") {
		cfg += "\n"
	}
	for _, kv := range defaults {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(kv[0]) + `\s*=`).MatchString(extra) {
			cfg += kv[0] + " = " + kv[1] + "\n"
		}
	}
	cfgPath := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	wrapper = filepath.Join(dir, "xpu-container-runtime")
	script := fmt.Sprintf("#!/bin/sh\nXPU_CONTAINER_TOOLKIT_CONFIG=%s exec %s \"$@\"\n", cfgPath, Binary(t, "xpu-container-runtime"))
	require.NoError(t, os.WriteFile(wrapper, []byte(script), 0o755))
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(logFile)
			t.Logf("shim log %s:\n%s", logFile, data)
		}
	})
	return wrapper, logFile
}

// expectWithVisible is expect plus the XPU_VISIBLE_DEVICES the shim sets.
func expectWithVisible(tree *fakehost.Tree, idx ...int) (map[string]string, []string) {
	nodes, env := expect(tree, idx...)
	s := make([]string, len(idx))
	for i, n := range idx {
		s[i] = fmt.Sprint(n)
	}
	env = append(env, "XPU_VISIBLE_DEVICES="+strings.Join(s, ","))
	sort.Strings(env)
	return nodes, env
}

// validNames is the part of the error that lists the device names.
const validNames = "valid names of baidu.com/xpu (jit mode): 0, 1, 2, 3, 4, 5, 6, 7"

// privileged here means every device allowed by the device cgroup rules
// (what the shim checks, and what --privileged writes): --privileged itself
// cannot run on this machine kind, whose bounding set lacks
// CAP_SYS_RESOURCE ("unable to apply caps"), so the tests write that rule
// with --device-cgroup-rule 'a *:* rwm'. CAP_SYS_ADMIN alone is no
// privilege to the shim (TestShimDocker, "CAP_SYS_ADMIN is not privileged").

func TestShimDocker(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	xpu, xpuLog := shimRuntime(t, tree, "")
	xpuAccept, _ := shimRuntime(t, tree, "accept-envvar-when-unprivileged = true\n")
	xpuFail, _ := shimRuntime(t, tree, "fail-on-refused-envvar = true\n")
	d := harness.NewDockerd(t, map[string]any{
		"runtimes": map[string]any{
			"xpu":        map[string]any{"path": xpu},
			"xpu-accept": map[string]any{"path": xpuAccept},
			"xpu-fail":   map[string]any{"path": xpuFail},
		},
	})
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	image := d.ImportImage(t, rootfs, "xpu-e2e-busybox")

	t.Run("privileged gets exactly 0 and 3", func(t *testing.T) {
		r := d.MustDocker(t, "run", "--rm", "--runtime", "xpu", "--device-cgroup-rule", "a *:* rwm", "-e", "XPU_VISIBLE_DEVICES=3,0", image, "sh", "-c", listXPUs)
		nodes, env := parseNodes(t, r.Stdout)
		wantNodes, wantEnv := expectWithVisible(tree, 0, 3)
		require.Equal(t, wantNodes, nodes)
		require.Equal(t, wantEnv, env)
	})

	t.Run("CAP_SYS_ADMIN is not privileged", func(t *testing.T) {
		// docs/security.md, "CAP_SYS_ADMIN as privilege": the device
		// cgroup of such a container refuses
		// the XPU nodes, so the variable must not add them. (Docker 20.10
		// has no --annotation; the annotated case is TestShimContainerd16's.)
		r := d.MustDocker(t, "run", "--rm", "--runtime", "xpu", "--cap-add", "SYS_ADMIN", "-e", "XPU_VISIBLE_DEVICES=all", image, "sh", "-c", listXPUs)
		nodes, env := parseNodes(t, r.Stdout)
		require.Empty(t, nodes)
		require.Equal(t, []string{"XPU_VISIBLE_DEVICES=all"}, env, "the bundle is left as it was")
	})

	t.Run("driver libraries and ld cache through the hook", func(t *testing.T) {
		r := d.MustDocker(t, "run", "--rm", "--runtime", "xpu", "--device-cgroup-rule", "a *:* rwm", "-e", "XPU_VISIBLE_DEVICES="+tree.Devices[2].BDF, image,
			"sh", "-c", "ls /usr/local/xpu/lib64; xpu-smi; echo XPU_VISIBLE_DEVICES=$XPU_VISIBLE_DEVICES")
		require.Contains(t, r.Stdout, "libxpurt.so.1\n")
		require.Contains(t, r.Stdout, "/dev/xpu2")
		require.Contains(t, r.Stdout, "XPU_VISIBLE_DEVICES=2\n")
	})

	t.Run("unprivileged variable is ignored by default", func(t *testing.T) {
		// An image that bakes the variable still runs, without XPUs.
		r := d.MustDocker(t, "run", "--rm", "--runtime", "xpu", "-e", "XPU_VISIBLE_DEVICES=0", image, "sh", "-c", listXPUs)
		nodes, env := parseNodes(t, r.Stdout)
		require.Empty(t, nodes)
		require.Equal(t, []string{"XPU_VISIBLE_DEVICES=0"}, env, "the bundle is left as it was")
		log, err := os.ReadFile(xpuLog)
		require.NoError(t, err)
		require.Contains(t, string(log), "it starts without XPUs")
	})

	t.Run("unprivileged is refused with fail-on-refused-envvar", func(t *testing.T) {
		r := d.Docker(t, "run", "--rm", "--runtime", "xpu-fail", "-e", "XPU_VISIBLE_DEVICES=0", image, "true")
		require.NotZero(t, r.ExitCode, r.String())
		require.Contains(t, r.Stderr, "is not privileged (its device cgroup rules do not allow every device")
		require.Contains(t, r.Stderr, "accept-envvar-when-unprivileged = true")
	})

	t.Run("unprivileged accepted when configured", func(t *testing.T) {
		r := d.MustDocker(t, "run", "--rm", "--runtime", "xpu-accept", "-e", "XPU_VISIBLE_DEVICES=1,all", image, "sh", "-c", listXPUs)
		nodes, env := parseNodes(t, r.Stdout)
		wantNodes, wantEnv := expectWithVisible(tree, 0, 1, 2, 3, 4, 5, 6, 7)
		require.Equal(t, wantNodes, nodes)
		require.Equal(t, wantEnv, env)
	})

	t.Run("no variable runs as with runc", func(t *testing.T) {
		probe := "ls -l /dev | grep -v ' ptmx$' | sed 's/  */ /g'; env | grep -v '^HOSTNAME=' | sort; cat /proc/self/status | grep '^Cap'; grep -c . /proc/self/mountinfo"
		viaShim := d.MustDocker(t, "run", "--rm", "--runtime", "xpu", image, "sh", "-c", probe)
		viaRunc := d.MustDocker(t, "run", "--rm", "--runtime", "runc", image, "sh", "-c", probe)
		require.Equal(t, viaRunc.Stdout, viaShim.Stdout)
		require.NotContains(t, viaShim.Stdout, "xpu")
		r := d.MustDocker(t, "run", "--rm", "--runtime", "xpu", "-e", "XPU_VISIBLE_DEVICES=none", image, "sh", "-c", listXPUs)
		require.Equal(t, "XPU_VISIBLE_DEVICES=none\n", r.Stdout)
	})

	t.Run("unknown device name", func(t *testing.T) {
		r := d.Docker(t, "run", "--rm", "--runtime", "xpu", "--device-cgroup-rule", "a *:* rwm", "-e", "XPU_VISIBLE_DEVICES=0,9", image, "true")
		require.NotZero(t, r.ExitCode, r.String())
		require.Contains(t, r.Stderr, "unknown XPU device baidu.com/xpu=9")
		require.Contains(t, r.Stderr, validNames)
	})
}

func TestShimContainerd16(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	xpu, _ := shimRuntime(t, tree, "")
	c := harness.NewContainerd16(t)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	ref := c.ImportImage(t, rootfs, "xpu-e2e-busybox")

	// The device plugin's volume-mounts answer (ctr cannot run privileged
	// on this machine kind; CAP_SYS_ADMIN and the variable give nothing).
	r := c.MustCtr(t, "run", "--rm", "--runc-binary", xpu, "--cap-add", "CAP_SYS_ADMIN", "--env", "XPU_VISIBLE_DEVICES=all",
		"--mount", "type=bind,src=/dev/null,dst=/var/run/xpu-container-devices/0,options=rbind:ro",
		"--mount", "type=bind,src=/dev/null,dst=/var/run/xpu-container-devices/3,options=rbind:ro",
		ref, "shim-ctd16-a", "sh", "-c", listXPUs)
	nodes, env := parseNodes(t, r.Stdout)
	wantNodes, wantEnv := expectWithVisible(tree, 0, 3)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)

	// A cdi.k8s.io annotation from an unprivileged container (what a
	// device plugin or the kubelet would set).
	r = c.MustCtr(t, "run", "--rm", "--runc-binary", xpu, "--annotation", "cdi.k8s.io/e2e_0=baidu.com/xpu=6", ref, "shim-ctd16-b", "sh", "-c", listXPUs)
	nodes, env = parseNodes(t, r.Stdout)
	wantNodes, wantEnv = expectWithVisible(tree, 6)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)

	// docs/security.md, "CAP_SYS_ADMIN as privilege": annotated for
	// XPU 0, with CAP_SYS_ADMIN, the
	// image (here the command line) asks for all: XPU 0 only.
	r = c.MustCtr(t, "run", "--rm", "--runc-binary", xpu, "--cap-add", "CAP_SYS_ADMIN", "--annotation", "cdi.k8s.io/e2e_0=baidu.com/xpu=0",
		"--env", "XPU_VISIBLE_DEVICES=all", ref, "shim-ctd16-d", "sh", "-c", listXPUs)
	nodes, env = parseNodes(t, r.Stdout)
	wantNodes, wantEnv = expectWithVisible(tree, 0)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)

	// The variable from an unprivileged container is ignored: it runs
	// without XPUs.
	r = c.MustCtr(t, "run", "--rm", "--runc-binary", xpu, "--env", "XPU_VISIBLE_DEVICES=0", ref, "shim-ctd16-c", "sh", "-c", listXPUs)
	nodes, env = parseNodes(t, r.Stdout)
	require.Empty(t, nodes)
	require.Equal(t, []string{"XPU_VISIBLE_DEVICES=0"}, env)
}

func TestShimPodman(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	xpu, _ := shimRuntime(t, tree, "")
	p := harness.NewPodman(t)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	p.ImportImage(t, rootfs, "xpu-e2e-busybox")

	r := p.MustRun(t, "run", "--rm", "--runtime", xpu, "--device-cgroup-rule", "a *:* rwm", "-e", "XPU_VISIBLE_DEVICES=0,3", "xpu-e2e-busybox", "sh", "-c", listXPUs)
	nodes, env := parseNodes(t, r.Stdout)
	wantNodes, wantEnv := expectWithVisible(tree, 0, 3)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)

	r = p.MustRun(t, "run", "--rm", "--runtime", xpu, "--annotation", "cdi.k8s.io/e2e_0=baidu.com/xpu="+tree.Devices[4].Serial, "xpu-e2e-busybox", "sh", "-c", listXPUs)
	nodes, env = parseNodes(t, r.Stdout)
	wantNodes, wantEnv = expectWithVisible(tree, 4)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)

	r = p.MustRun(t, "run", "--rm", "--runtime", xpu, "-e", "XPU_VISIBLE_DEVICES=NONE", "xpu-e2e-busybox", "sh", "-c", listXPUs)
	require.Equal(t, "XPU_VISIBLE_DEVICES=NONE\n", r.Stdout, "keywords are case-insensitive")

	r = p.MustRun(t, "run", "--rm", "--runtime", xpu, "-e", "XPU_VISIBLE_DEVICES=0", "xpu-e2e-busybox", "sh", "-c", listXPUs)
	nodes, env = parseNodes(t, r.Stdout)
	require.Empty(t, nodes, "the variable of an unprivileged container is ignored")
	require.Equal(t, []string{"XPU_VISIBLE_DEVICES=0"}, env)

	r = p.MustRun(t, "run", "--rm", "--runtime", xpu, "xpu-e2e-busybox", "sh", "-c", listXPUs)
	require.Empty(t, r.Stdout)
}

// runcBundle writes a bundle for runc: `runc spec` defaults (unprivileged,
// no terminal), the shared read-only rootfs, /result bound to out.
func runcBundle(t *testing.T, rootfs, out string, args []string, env []string, annotations map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("runc", "spec", "--bundle", dir)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "runc spec: %s", b)
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	var spec oci.Spec
	require.NoError(t, json.Unmarshal(data, &spec))
	spec.Root = &oci.Root{Path: rootfs, Readonly: true}
	spec.Process.Terminal = false
	spec.Process.Args = args
	spec.Process.Env = append(spec.Process.Env, env...)
	spec.Annotations = annotations
	if out != "" {
		spec.Mounts = append(spec.Mounts, oci.Mount{Destination: "/result", Type: "bind", Source: out, Options: []string{"rbind", "rw"}})
	}
	data, err = json.MarshalIndent(&spec, "", "\t")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644))
	return dir
}
