//go:build no_podresources

package partition

import (
	"context"
	"errors"

	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
)

// ErrNoPodResourcesClient is the error of askKubelet in a build without
// the kubelet's PodResources client (the build tag no_podresources).
var ErrNoPodResourcesClient = errors.New("this xpu-cdi was built without the kubelet PodResources client (build tag no_podresources), " +
	"so it cannot tell which pods hold the cards; use a build without the tag, " +
	"or --pod-resources-socket \"\" to check processes only")

// askKubelet refuses: a kubelet socket exists, and which pods hold the
// cards can only be learnt from it. Going on with processes only would
// re-lay-out cards that pods hold without an open /dev/xpuN.
func askKubelet(context.Context, string, podresources.Config) (podresources.Owners, error) {
	return nil, ErrNoPodResourcesClient
}
