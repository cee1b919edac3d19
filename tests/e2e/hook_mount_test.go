package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// TestHookNeverWritesIntoABindMount reproduces the attack "Writes
// through a mount point" (docs/security.md) under real runc: the image points /etc (or /etc/ld.so.conf.d) at a host directory
// that the pod mounts read-write into the container (a hostPath volume
// without readOnly), and the container runs as a user who cannot write
// there. The hook, running as root, must not write there either: the host
// directory is byte-identical afterwards, and the container starts with its
// XPU (the hook warns and skips the loader files).
func TestHookNeverWritesIntoABindMount(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	wrapper, _ := shimRuntime(t, tree, "")
	state := t.TempDir()

	for _, tc := range []struct {
		description string
		shape       func(t *testing.T, rootfs string)
	}{
		{
			description: "/etc is a symlink to the volume",
			shape: func(t *testing.T, rootfs string) {
				require.NoError(t, os.RemoveAll(filepath.Join(rootfs, "etc")))
				require.NoError(t, os.Symlink("/data", filepath.Join(rootfs, "etc")))
			},
		},
		{
			description: "/etc/ld.so.conf.d is a symlink into the volume",
			shape: func(t *testing.T, rootfs string) {
				require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755))
				require.NoError(t, os.RemoveAll(filepath.Join(rootfs, "etc", "ld.so.conf.d")))
				require.NoError(t, os.Symlink("../data/ld.so.conf.d", filepath.Join(rootfs, "etc", "ld.so.conf.d")))
			},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			rootfs := glibcRootfs(t)
			tc.shape(t, rootfs)
			host := hostDir(t)
			require.NoError(t, os.Chmod(host, 0o755))
			before := snapshot(t, host)
			out := t.TempDir()
			require.NoError(t, os.Chmod(out, 0o777))

			script := []string{"sh", "-c", "{ id -u; ls /dev/xpu0; touch /data/by-user 2>&1; true; } > /result/out.tmp; mv /result/out.tmp /result/out"}
			bundle := runcBundle(t, rootfs, out, script, nil, map[string]string{"cdi.k8s.io/e2e": "baidu.com/xpu=0"})
			cfgPath := filepath.Join(bundle, "config.json")
			data, err := os.ReadFile(cfgPath)
			require.NoError(t, err)
			var spec oci.Spec
			require.NoError(t, json.Unmarshal(data, &spec))
			spec.Root.Readonly = false
			spec.Process.User = oci.User{UID: 1000, GID: 1000}
			spec.Mounts = append(spec.Mounts, oci.Mount{Destination: "/data", Type: "bind", Source: host, Options: []string{"rbind", "rw"}})
			data, err = json.Marshal(&spec)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(cfgPath, data, 0o644))

			id := fmt.Sprintf("xpu-hook-mount-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
			t.Cleanup(func() { _ = exec.Command("runc", "--root", state, "delete", "--force", id).Run() })
			msg, err := runShim(t, wrapper, "--root", state, "create", "--bundle", bundle, id)
			require.NoError(t, err, "the container must be created: %s", msg)
			msg, err = runShim(t, wrapper, "--root", state, "start", id)
			require.NoError(t, err, msg)
			result := filepath.Join(out, "out")
			require.Eventually(t, func() bool { _, err := os.Stat(result); return err == nil }, 30*time.Second, 20*time.Millisecond)
			got, err := os.ReadFile(result)
			require.NoError(t, err)
			require.Contains(t, string(got), "1000\n/dev/xpu0\n")
			require.Contains(t, string(got), "Permission denied", "the container's user cannot write to the volume")
			require.Equal(t, before, snapshot(t, host), "the host directory must be byte-identical")
		})
	}
}
