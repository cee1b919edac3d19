package dra

import (
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/xpu-cdi/xpu-cdi/internal/privsock"
)

// SocketOptions make the helper library create the driver's sockets (the
// DRA service's dra.sock and the registration socket) with mode 0600
// whatever the umask: the library's own listener follows the umask, and
// whoever can connect to dra.sock prepares claims, whose records then hold
// devices against the claims the kubelet prepares.
func SocketOptions() []kubeletplugin.Option {
	return []kubeletplugin.Option{
		kubeletplugin.PluginListener(privsock.ListenReplacing),
		kubeletplugin.RegistrarListener(privsock.ListenReplacing),
	}
}
