package dra

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"path/filepath"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/xpu-cdi/xpu-cdi/internal/privsock"
)

// unixPathMax is the longest path a unix socket can be bound to or dialled
// at on Linux: sun_path has 108 bytes, the terminating NUL included (Go's
// net package refuses a 108-byte path with EINVAL, as the kernel would
// read it unterminated).
const unixPathMax = 107

// SocketOptions make the helper library create the driver's sockets (the
// DRA service's dra.sock and the registration socket) with mode 0600
// whatever the umask: the library's own listener follows the umask, and
// whoever can connect to dra.sock prepares claims, whose records then hold
// devices against the claims the kubelet prepares.
func SocketOptions() []kubeletplugin.Option {
	return []kubeletplugin.Option{
		kubeletplugin.PluginListener(privsock.ListenReplacing),
		kubeletplugin.RegistrarListener(listenRegistrar),
	}
}

// listenRegistrar is privsock.ListenReplacing at the registration socket's
// path, or at a shorter name in the same directory when that path is too
// long for a unix socket. With rolling updates (--pod-uid) the helper
// library picks the name <driver>-<pod UID>-reg.sock whenever the path has
// at most 108 bytes, one more than a socket takes: with a registry
// directory of 48 bytes (/tmp/xe2e-k8s-123456789/kubelet/plugins_registry)
// bind failed with "invalid argument" and the driver exited (kubernetes
// PR 141815 fixes the library's check for 1.38; v0.37.2 has it). The kubelet
// finds the socket by watching the directory, whatever its name; the name
// stays unique per pod (a hash of the library's, which holds the pod UID).
func listenRegistrar(ctx context.Context, path string) (net.Listener, error) {
	if len(path) > unixPathMax {
		sum := sha256.Sum256([]byte(filepath.Base(path)))
		path = filepath.Join(filepath.Dir(path), "dra-"+base64.RawURLEncoding.EncodeToString(sum[:16])+"-reg.sock")
	}
	return privsock.ListenReplacing(ctx, path)
}
