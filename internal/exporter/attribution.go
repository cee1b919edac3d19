package exporter

import (
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
)

// Defaults of the attribution (package podresources holds the client).
const (
	// DefaultPodResourcesTimeout bounds one List call.
	DefaultPodResourcesTimeout = podresources.DefaultTimeout
	// DefaultPodResourcesMaxMessage bounds one List answer.
	DefaultPodResourcesMaxMessage = podresources.DefaultMaxMessage
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
