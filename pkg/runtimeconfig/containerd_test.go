package runtimeconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContainerdForwardsCDIContainerAnnotations: the xpu runtime entry of
// both config versions lets the CRI plugin copy cdi.k8s.io container
// annotations into the OCI spec (containerd 1.6 passes none otherwise, so
// the device plugin's cdi-annotations answer would never reach the shim),
// and never forwards pod annotations, which pod authors write. Revert
// gives back exactly the files there were before.
func TestContainerdForwardsCDIContainerAnnotations(t *testing.T) {
	tests := []struct {
		description string
		main        string
		plugin      string
	}{
		{"version 2", "version = 2\n", criPluginV2},
		{"version 3", "version = 3\n", criPluginV3},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, files{DefaultContainerdConfig: tc.main})
			before := snapshot(t, root)
			c, err := New(Containerd, rootedPaths(Containerd, root)...)
			require.NoError(t, err)
			plan, err := c.Configure()
			require.NoError(t, err)
			require.NoError(t, plan.Apply())

			path := filepath.Join(root, DefaultContainerdDropIn)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			tree, err := parseTOML(path, b)
			require.NoError(t, err)
			rt, ok := lookup(tree, []string{"plugins", tc.plugin, "containerd", "runtimes", "xpu"})
			require.True(t, ok, "no xpu runtime in the drop-in:\n%s", b)
			entry, ok := rt.(map[string]any)
			require.True(t, ok)
			require.Equal(t, []any{"cdi.k8s.io/*"}, entry["container_annotations"])
			require.NotContains(t, entry, "pod_annotations", "pod annotations must never be forwarded")

			rev, err := c.Revert()
			require.NoError(t, err)
			require.NoError(t, rev.Apply())
			require.Equal(t, before, snapshot(t, root), "revert must remove exactly what configure added")
		})
	}
}
