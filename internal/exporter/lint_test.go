package exporter

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources/podresourcestest"
)

// The collector's series pass promlint, the linter promtool check metrics
// runs, on a host with every source (xpu-smi, /proc/xpu, attribution).
func TestCollectorLint(t *testing.T) {
	sock := podresourcestest.Serve(t, podresourcestest.NewServer(listResponse()))
	c, _ := hostCollector(t, fakehost.R200SRIOV(), func(*fakehost.Tree, *fakehost.XPUSMIState) {}, Config{Pods: podresources.New(sock, podresources.Config{})})
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)
}
