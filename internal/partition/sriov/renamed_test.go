package sriov

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
)

// A card whose device a pod holds under the device plugin's renamed
// resource (rename: example.com/xpu-ts) is in use once the in-use check
// reads the plugin's sharing configuration, as the installer and
// `xpu-cdi partition --sharing-config-file` do.
func TestInUseByRenamedResource(t *testing.T) {
	tr := build(t, fakehost.R200SRIOV())
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: baidu.com/xpu\n        replicas: 4\n        rename: example.com/xpu-ts\n"), 0o644))
	srv := podresourcestest.NewServer(&podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
		podresourcestest.DevicePluginPod("ml", "ts", "app", "example.com/xpu-ts", "3::1"),
	}})
	c := config(tr)
	c.PodResourcesSocket = podresourcestest.Serve(t, srv)
	l, err := partition.ParseLayout("0=1")
	require.NoError(t, err)
	c.DryRun = true

	_, err = Apply(context.Background(), c, l)
	require.NoError(t, err, "without the file the rename is not known")

	c.PodResources, err = podresources.Config{}.WithSharingFile(file)
	require.NoError(t, err)
	s, err := partition.Show(context.Background(), c.Config)
	require.NoError(t, err)
	require.Equal(t, []partition.User{{Node: "/dev/xpu3", Pod: "ts", Namespace: "ml", Container: "app"}}, s.Cards[0].InUse)
	_, err = Apply(context.Background(), c, l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, "pod ml/ts container app holding /dev/xpu3")
}
