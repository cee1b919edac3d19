//go:build no_podresources

package partition

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
)

// Built without the PodResources client, a kubelet socket that exists is
// refused (its pods' cards would go unchecked), and one that does not is
// the note of a host without a kubelet, as in the standard build.
func TestNoPodResourcesClient(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	sock := filepath.Join(t.TempDir(), "kubelet.sock")

	c := config(tr)
	c.PodResourcesSocket = sock
	s, err := Show(context.Background(), c)
	require.NoError(t, err)
	require.Contains(t, s.Notes, "no kubelet PodResources socket at "+sock+": which pods hold the cards was not checked")

	require.NoError(t, os.WriteFile(sock, nil, 0o600))
	_, err = Show(context.Background(), c)
	require.ErrorIs(t, err, ErrNoPodResourcesClient)
	require.ErrorContains(t, err, "--pod-resources-socket "+sock)
}
