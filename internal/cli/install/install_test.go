package install

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	app := &cli.App{Name: "xpu-cdi", Commands: []*cli.Command{NewCommand(log), NewUninstallCommand(log)}, Writer: io.Discard, ErrWriter: io.Discard}
	err := app.Run(append([]string{"xpu-cdi"}, args...))
	return logs.String(), err
}

// TestInstallOnceAndUninstall runs the commands on a fake host with real
// device nodes, as the DaemonSet runs them on /host.
func TestInstallOnceAndUninstall(t *testing.T) {
	testreq.Root(t, "real device nodes made with mknod")
	hook := buildHook(t)

	tree := fakehosttest.Build(t, fakehost.P800x8())
	require.True(t, tree.RealNodes)
	flags := []string{"--host-root", tree.Root, "--hook-dir", "/opt/xpu-cdi/bin", "--output", "/etc/cdi/baidu.com-xpu.yaml"}
	logs, err := run(t, append(append([]string{"install", "--once", "--hook-source", hook}, flags...), "--device-name-strategy", "index")...)
	require.NoError(t, err, logs)
	require.Contains(t, logs, "CDI spec /etc/cdi/baidu.com-xpu.yaml written")
	data, err := os.ReadFile(tree.Path("/etc/cdi/baidu.com-xpu.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(data), "path: /opt/xpu-cdi/bin/xpu-runtime-hook")
	require.NotContains(t, string(data), tree.Root)

	logs, err = run(t, append([]string{"uninstall"}, flags...)...)
	require.NoError(t, err, logs)
	require.NoFileExists(t, tree.Path("/etc/cdi/baidu.com-xpu.yaml"))
	require.NoDirExists(t, tree.Path("/opt/xpu-cdi"))

	// The driver tree elsewhere on the host (a driver container's): the spec
	// names it by the host's path.
	host, sub := filepath.Dir(tree.Root), "/"+filepath.Base(tree.Root)
	logs, err = run(t, "install", "--once", "--hook-source", hook, "--host-root", host, "--dev-root", sub, "--driver-root", sub,
		"--hook-dir", "/hooks", "--output", "/cdi/xpu.json")
	require.NoError(t, err, logs)
	data, err = os.ReadFile(filepath.Join(host, "cdi", "xpu.json"))
	require.NoError(t, err)
	require.Contains(t, string(data), `"hostPath": "`+sub+`/dev/xpu0"`)
	require.Contains(t, string(data), `"path": "/hooks/xpu-runtime-hook"`)
	_, err = run(t, "uninstall", "--host-root", host, "--hook-dir", "/hooks", "--output", "/cdi/xpu.json")
	require.NoError(t, err)
	require.NoDirExists(t, filepath.Join(host, "hooks"))
	require.NoDirExists(t, filepath.Join(host, "cdi"))

	// No driver: --once says so and writes no spec.
	require.NoError(t, os.RemoveAll(tree.Path("/dev")))
	_, err = run(t, append([]string{"install", "--once", "--hook-source", hook}, flags...)...)
	require.ErrorContains(t, err, "no usable XPU on this node yet: no CDI spec written to /etc/cdi/baidu.com-xpu.yaml")
}

func TestInstallBadFlags(t *testing.T) {
	_, err := run(t, "install", "--interval", "1ms")
	require.ErrorContains(t, err, "--interval 1ms is too short")
	_, err = run(t, "install", "--host-root", t.TempDir(), "--vendor", "Bad Vendor")
	require.ErrorContains(t, err, "--vendor/--class")
	_, err = run(t, "install", "--host-root", t.TempDir(), "--device-name-strategy", "uuid")
	require.ErrorContains(t, err, "--device-name-strategy")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nsharing: {mps: {}}\n"), 0o644))
	_, err = run(t, "install", "--host-root", t.TempDir(), "--config-file", cfg)
	require.ErrorContains(t, err, "--config-file: sharing configuration "+cfg+": line 2: sharing.mps is not supported")
	_, err = run(t, "uninstall", "--host-root", filepath.Join(t.TempDir(), "none"))
	require.ErrorContains(t, err, "host root")

	_, err = run(t, "install", "--host-root", t.TempDir(), "--partition-layout", "all-2")
	require.ErrorContains(t, err, `--partition-layout: layout entry "all-2" is not SELECTOR=N`)
	_, err = run(t, "install", "--host-root", t.TempDir(), "--partition-node-label")
	require.ErrorContains(t, err, "--partition-node-label needs --node-name")
	_, err = run(t, "install", "--host-root", t.TempDir(), "--partition-label-interval", "1ms")
	require.ErrorContains(t, err, "--partition-label-interval 1ms is too short")
	// A file of named layouts: only with the node label, read at start,
	// and holding [NAME] sections.
	layouts := filepath.Join(t.TempDir(), "layouts.conf")
	require.NoError(t, os.WriteFile(layouts, []byte("[halves]\nall=2\n"), 0o644))
	_, err = run(t, "install", "--host-root", t.TempDir(), "--partition-config", layouts)
	require.ErrorContains(t, err, "--partition-config "+layouts+": only the node label names one of its layouts (name.NAME): give --partition-node-label too")
	require.NoError(t, os.WriteFile(layouts, []byte("all=2\n"), 0o644))
	_, err = run(t, "install", "--host-root", t.TempDir(), "--partition-node-label", "--node-name", "node-1", "--partition-config", layouts)
	require.ErrorContains(t, err, "--partition-config "+layouts+" holds no named layout ([NAME] lines)")
	require.NoError(t, os.WriteFile(layouts, []byte("[halves]\nall=x\n"), 0o644))
	_, err = run(t, "install", "--host-root", t.TempDir(), "--partition-node-label", "--node-name", "node-1", "--partition-config", layouts)
	require.ErrorContains(t, err, "--partition-config: "+layouts+": line 2: layout entry")
	_, err = run(t, "install", "--host-root", t.TempDir(), "--partition-node-label", "--node-name", "node-1", "--partition-config", layouts+".none")
	require.ErrorContains(t, err, "--partition-config: reading the layout file")
	// Outside a pod there is no API server to ask.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err = run(t, "install", "--host-root", t.TempDir(), "--partition-node-label", "--node-name", "node-1")
	require.ErrorContains(t, err, "--partition-node-label: the API server: not in a pod")
}

// TestInstallWaitsForTheLayoutLock: install's spec pass takes the node's
// layout lock below --host-root, the one partition apply and the DRA
// driver's dynamic partitions hold while they cut a card and rewrite the
// spec: while another holds it, the pass writes nothing and says why;
// once it is free, the pass writes the spec.
func TestInstallWaitsForTheLayoutLock(t *testing.T) {
	testreq.Root(t, "real device nodes made with mknod")
	hook := buildHook(t)
	tree := fakehosttest.Build(t, fakehost.P800x8())
	flags := []string{"install", "--once", "--hook-source", hook, "--host-root", tree.Root, "--hook-dir", "/opt/xpu-cdi/bin", "--output", "/etc/cdi/baidu.com-xpu.yaml"}
	defer func(w time.Duration) { specLockWait = w }(specLockWait)
	specLockWait = 200 * time.Millisecond

	lock, err := sriov.LockLayout(context.Background(), tree.Root, 0)
	require.NoError(t, err)
	logs, err := run(t, flags...)
	require.ErrorIs(t, err, sriov.ErrLocked, logs)
	require.ErrorContains(t, err, "is left as it is until the next pass: another process is laying out")
	require.NoFileExists(t, tree.Path("/etc/cdi/baidu.com-xpu.yaml"))

	lock.Unlock()
	logs, err = run(t, flags...)
	require.NoError(t, err, logs)
	require.FileExists(t, tree.Path("/etc/cdi/baidu.com-xpu.yaml"))
}
