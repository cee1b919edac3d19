package partition

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

// The read model and the writer are two packages: what only reads
// layouts (the device plugin, through the layout label) links no
// sriov_numvfs writer, and the writer needs no CLI, so a driver can cut
// cards with it.
func TestTheWriterStandsApart(t *testing.T) {
	const writer = "internal/partition/sriov"
	plugin := testutil.ModuleImports(t, "../..", "../../cmd/xpu-device-plugin")
	require.True(t, plugin["internal/partition"], "the device plugin reads layouts through internal/partition")
	require.False(t, plugin[writer], "the device plugin links the SR-IOV writer")
	read := testutil.ModuleImports(t, "../..", ".")
	require.False(t, read[writer], "the read model imports the writer")
	for pkg := range testutil.ModuleImports(t, "../..", "sriov") {
		require.NotContains(t, pkg, "internal/cli", "the writer imports a CLI package")
	}
}
