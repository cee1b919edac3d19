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
		opts        []Option
		// forwarded: the CRI plugin resolves no CDI itself, so the
		// annotations must reach the shim.
		forwarded bool
	}{
		{"version 2", "version = 2\n", criPluginV2, nil, true},
		{"version 2, CDI enabled by configure", "version = 2\n", criPluginV2, []Option{WithCDI(true)}, false},
		{"version 2, CDI enabled in the main file", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n", criPluginV2, nil, false},
		{"version 3 (containerd 2.x resolves CDI itself)", "version = 3\n", criPluginV3, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, files{DefaultContainerdConfig: tc.main})
			before := snapshot(t, root)
			c, err := New(Containerd, append(rootedPaths(Containerd, root), tc.opts...)...)
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
			if tc.forwarded {
				require.Equal(t, []any{"cdi.k8s.io/*"}, entry["container_annotations"])
			} else {
				require.NotContains(t, entry, "container_annotations", "the CRI plugin resolves CDI: the shim would apply the edits again")
			}
			require.NotContains(t, entry, "pod_annotations", "pod annotations must never be forwarded")

			rev, err := c.Revert()
			require.NoError(t, err)
			require.NoError(t, rev.Apply())
			require.Equal(t, before, snapshot(t, root), "revert must remove exactly what configure added")
		})
	}
}
