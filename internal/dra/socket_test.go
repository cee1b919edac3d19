package dra

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/privsock"
)

// TestSocketsIgnoreUmask starts the real helper library with the driver's
// SocketOptions under umask 000: dra.sock and the registration socket are
// 0600 (the library's default listener would make them 0777).
func TestSocketsIgnoreUmask(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	dataDir, regDir := shortDir(t), shortDir(t)
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	helper, err := kubeletplugin.Start(ctx, f.d, append([]kubeletplugin.Option{
		kubeletplugin.DriverName(f.d.DriverName()),
		kubeletplugin.NodeName("node-1"),
		kubeletplugin.KubeClient(fake.NewClientset()),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
		kubeletplugin.RegistrarDirectoryPath(regDir),
	}, SocketOptions()...)...)
	require.NoError(t, err)
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
