package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestShimRuncCDIModeCache runs containers through the shim in cdi mode
// with real runc: the first create parses the generated spec and writes the
// spec cache, the next ones use it, and a regenerated spec is followed at
// the next create (here: --nodes-only, so the libraries go away).
func TestShimRuncCDIModeCache(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	specDir := t.TempDir()
	specFile := filepath.Join(specDir, "baidu.com-xpu.yaml")
	require.NoError(t, os.WriteFile(specFile, GenerateSpec(t, tree, "baidu.com"), 0o644))
	wrapper, logFile := shimRuntime(t, tree, fmt.Sprintf("mode = \"cdi\"\nspec-dirs = [%q]\n", specDir))
	cacheDir := filepath.Join(filepath.Dir(wrapper), "cache")
	rootfs := t.TempDir()
	require.NoError(t, os.Chmod(rootfs, 0o755))
	harness.BuildBusyboxRootfs(t, rootfs)
	state := t.TempDir()

	hits := func() int {
		data, err := os.ReadFile(logFile)
		require.NoError(t, err)
		return strings.Count(string(data), "spec cache hit")
	}
	// run creates and starts a container asking for device idx by
	// annotation; it returns what the container saw and the library
	// mounts the shim gave it.
	run := func(name string, idx int) (map[string]string, []string, []string) {
		t.Helper()
		out := t.TempDir()
		script := []string{"sh", "-c", "{ " + listXPUs + "; } > /result/out.tmp && mv /result/out.tmp /result/out"}
		bundle := runcBundle(t, rootfs, out, script, nil, map[string]string{"cdi.k8s.io/e2e": fmt.Sprintf("baidu.com/xpu=%d", idx)})
		id := fmt.Sprintf("xpu-shim-cdi-%d-%s", os.Getpid(), name)
		t.Cleanup(func() { _ = exec.Command("runc", "--root", state, "delete", "--force", id).Run() })
		msg, err := runShim(t, wrapper, "--root", state, "create", "--bundle", bundle, id)
		require.NoError(t, err, msg)
		msg, err = runShim(t, wrapper, "--root", state, "start", id)
		require.NoError(t, err, msg)
		result := filepath.Join(out, "out")
		require.Eventually(t, func() bool { _, err := os.Stat(result); return err == nil }, 30*time.Second, 20*time.Millisecond, "%s never wrote its result", id)
		data, err := os.ReadFile(result)
		require.NoError(t, err)
		nodes, env := parseNodes(t, string(data))

		cfg, err := os.ReadFile(filepath.Join(bundle, "config.json"))
		require.NoError(t, err)
		var spec oci.Spec
		require.NoError(t, json.Unmarshal(cfg, &spec))
		var libs []string
		for _, m := range spec.Mounts {
			if strings.Contains(m.Destination, ".so") {
				libs = append(libs, m.Destination)
			}
		}
		return nodes, env, libs
	}

	wantNodes, wantEnv := expectWithVisible(tree, 1)
	nodes, env, libs := run("miss", 1)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)
	require.NotEmpty(t, libs, "the generated spec mounts the XRE libraries")
	require.Equal(t, 0, hits())
	entries, err := filepath.Glob(filepath.Join(cacheDir, "cdi-*.json"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the first create wrote the cache entry")

	wantNodes, wantEnv = expectWithVisible(tree, 3)
	nodes, env, libs2 := run("hit", 3)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)
	require.Equal(t, libs, libs2)
	require.Equal(t, 1, hits(), "the second create used the cache")

	// The administrator regenerates the spec without libraries.
	require.NoError(t, os.WriteFile(specFile, GenerateSpec(t, tree, "baidu.com", "--nodes-only"), 0o644))
	nodes, env, libs = run("changed", 3)
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantEnv, env)
	require.Empty(t, libs, "the regenerated spec was read, not the cached one")
	require.Equal(t, 1, hits())
	_, _, libs = run("hit-again", 3)
	require.Empty(t, libs)
	require.Equal(t, 2, hits())
}
