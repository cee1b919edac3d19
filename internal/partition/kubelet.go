//go:build !no_podresources

package partition

import (
	"context"

	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
)

// askKubelet asks the kubelet's PodResources socket who holds which XPU.
func askKubelet(ctx context.Context, socket string, cfg podresources.Config) (podresources.Owners, error) {
	cl := podresources.New(socket, cfg)
	defer func() { _ = cl.Close() }()
	return cl.List(ctx)
}
