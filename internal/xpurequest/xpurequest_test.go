package xpurequest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

// The device plugin and the shim share these names through this package,
// and neither links the other (issue 29, item 2).
func TestOneHomeForTheSharedNames(t *testing.T) {
	plugin := testutil.ModuleImports(t, "../..", "../deviceplugin")
	shim := testutil.ModuleImports(t, "../..", "../shim")
	require.True(t, plugin["internal/xpurequest"], "internal/deviceplugin uses internal/xpurequest")
	require.True(t, shim["internal/xpurequest"], "internal/shim uses internal/xpurequest")
	require.False(t, plugin["internal/shim"], "internal/deviceplugin imports internal/shim")
	require.False(t, shim["internal/deviceplugin"], "internal/shim imports internal/deviceplugin")
}
