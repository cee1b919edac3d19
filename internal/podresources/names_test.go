package podresources_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/deviceplugin"
	"github.com/xpu-cdi/xpu-cdi/internal/dra"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
)

// The local copies of the device plugin's and the DRA driver's names are
// theirs.
func TestNamesAreThePluginsAndTheDriversOwn(t *testing.T) {
	require.Equal(t, deviceplugin.ReplicaSeparator, podresources.ReplicaSeparatorCopy)
	require.Equal(t, dra.DefaultDriverName, podresources.DefaultDRADriver)
	require.Equal(t, deviceplugin.DefaultResourceName, podresources.DefaultResourcePrefix)
	require.Equal(t, dra.DeviceName(7), podresources.DRADevicePrefixCopy+"7")
}
