package exporter

import (
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
)

// Defaults of the attribution (package podresources holds the client).
const (
	// DefaultPodResourcesSocket is the kubelet's PodResources socket.
	DefaultPodResourcesSocket = podresources.DefaultSocket
	// DefaultPodResourcesTimeout bounds one List call.
	DefaultPodResourcesTimeout = podresources.DefaultTimeout
	// DefaultPodResourcesMaxMessage bounds one List answer.
	DefaultPodResourcesMaxMessage = podresources.DefaultMaxMessage
	// DefaultResourcePrefix is what the device plugin's resource names
	// start with.
	DefaultResourcePrefix = podresources.DefaultResourcePrefix
	// DefaultDRADriver is the DRA driver whose claims are attributed.
	DefaultDRADriver = podresources.DefaultDRADriver
)

// Owner is a container that holds an XPU, as the kubelet reports it.
type Owner = podresources.Owner

// Owners maps the N of /dev/xpuN to the containers holding it.
type Owners = podresources.Owners

// PodResourcesConfig configures NewPodResources; zero fields take the
// defaults.
type PodResourcesConfig = podresources.Config

// PodResources asks the kubelet which containers hold which XPUs.
type PodResources = podresources.Client

// NewPodResources returns a client of the kubelet's PodResources socket. It
// connects on first use and reconnects by itself.
func NewPodResources(socket string, cfg PodResourcesConfig) *PodResources {
	return podresources.New(socket, cfg)
}
