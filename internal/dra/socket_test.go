package dra

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/privsock"
)

// startHelper starts the real helper library for d with the driver's
// SocketOptions and opts; it stops when the test ends.
func startHelper(t *testing.T, d *Driver, dataDir, regDir string, opts ...kubeletplugin.Option) *kubeletplugin.Helper {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	helper, err := kubeletplugin.Start(ctx, d, append(append([]kubeletplugin.Option{
		kubeletplugin.DriverName(d.DriverName()),
		kubeletplugin.NodeName("node-1"),
		kubeletplugin.KubeClient(fake.NewClientset()),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
		kubeletplugin.RegistrarDirectoryPath(regDir),
	}, opts...), SocketOptions()...)...)
	require.NoError(t, err)
	return helper
}

// TestSocketsIgnoreUmask starts the real helper library with the driver's
// SocketOptions under umask 000: dra.sock and the registration socket are
// 0600 (the library's default listener would make them 0777).
func TestSocketsIgnoreUmask(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	dataDir, regDir := shortDir(t), shortDir(t)
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	helper := startHelper(t, f.d, dataDir, regDir)
	socks := []string{filepath.Join(dataDir, "dra.sock"), filepath.Join(regDir, f.d.DriverName()+"-reg.sock")}
	for _, s := range socks {
		fi, err := os.Stat(s)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(privsock.Mode), fi.Mode().Perm(), s)
	}
	helper.Stop()
	for _, s := range socks {
		require.NoFileExists(t, s, "the helper's Stop removes its sockets")
	}
}

// TestRegistrationSocketPathOfMaxLength: with rolling updates and a
// registry directory for which the helper library's name makes a path of
// exactly 108 bytes (one more than a unix socket takes), the driver still
// starts and serves a registration socket in that directory that a client
// can dial (the kubelet finds it by watching the directory).
func TestRegistrationSocketPathOfMaxLength(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	uid := types.UID("1cf3cb70-ce64-49b9-b666-24a2408f20cd")
	base := f.d.DriverName() + "-" + string(uid) + "-reg.sock"
	// In /tmp, not TMPDIR: the path must leave room for the padding.
	regDir, err := os.MkdirTemp("/tmp", "xdra")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(regDir) })
	pad := unixPathMax + 1 - len(regDir) - 2 - len(base)
	require.Positive(t, pad, "the temporary directory %s is too long for this test", regDir)
	regDir = filepath.Join(regDir, strings.Repeat("r", pad))
	require.NoError(t, os.Mkdir(regDir, 0o700))
	require.Equal(t, base, kubeletplugin.RollingUpdateRegistrarSocketFile(regDir, f.d.DriverName(), uid), "the library's choice")
	require.Len(t, filepath.Join(regDir, base), unixPathMax+1)

	helper := startHelper(t, f.d, shortDir(t), regDir, kubeletplugin.RollingUpdate(uid))
	entries, err := os.ReadDir(regDir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	sock := filepath.Join(regDir, entries[0].Name())
	require.LessOrEqual(t, len(sock), unixPathMax)
	conn, err := net.Dial("unix", sock)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	helper.Stop()
	require.NoFileExists(t, sock, "the helper's Stop removes its socket")
}
