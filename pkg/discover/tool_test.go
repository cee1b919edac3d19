package discover_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// xpuSMI is XRE 4's xpu_smi below the versioned XRE directory.
const xpuSMI = "/bin/xpu_smi"

// TestToolSearch: xpu-smi is the first of the tool paths that is a regular
// file with an execute bit, its links resolved inside the driver root.
func TestToolSearch(t *testing.T) {
	for _, tc := range []struct {
		description string
		tweak       func(t *testing.T, tree *fakehost.Tree)
		want        string // in-root path of the file found; "" for none
	}{
		{
			description: "through the /usr/local/bin link",
			tweak:       func(*testing.T, *fakehost.Tree) {},
			want:        xpuSMI,
		},
		{
			description: "an absolute link stays inside the root",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				require.NoError(t, os.Remove(tree.Path(fakehost.XPUSMILink)))
				require.NoError(t, os.Symlink(fakehost.XPUSMIPath, tree.Path(fakehost.XPUSMILink)))
			},
			want: xpuSMI,
		},
		{
			description: "a file without an execute bit is passed over",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				require.NoError(t, os.Chmod(tree.Path(tree.XREDir+xpuSMI), 0o644))
				require.NoError(t, os.MkdirAll(tree.Path("/usr/bin"), 0o755))
				require.NoError(t, os.WriteFile(tree.Path("/usr/bin/xpu-smi"), []byte("#!/bin/sh\n"), 0o755))
			},
			want: "/usr/bin/xpu-smi",
		},
		{
			description: "a directory is passed over",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				require.NoError(t, os.Remove(tree.Path(fakehost.XPUSMILink)))
				require.NoError(t, os.Mkdir(tree.Path(fakehost.XPUSMILink), 0o755))
			},
			want: xpuSMI,
		},
		{
			description: "a link out of the root names a file inside it",
			tweak: func(t *testing.T, tree *fakehost.Tree) {
				outside := filepath.Join(t.TempDir(), "xpu-smi")
				require.NoError(t, os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755))
				require.NoError(t, os.Chmod(tree.Path(tree.XREDir+xpuSMI), 0o644))
				require.NoError(t, os.MkdirAll(tree.Path("/usr/bin"), 0o755))
				require.NoError(t, os.Symlink(outside, tree.Path("/usr/bin/xpu-smi"))) // resolves to <root><outside>: absent
			},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := fakehosttest.Build(t, fakehost.P800x8(), fakehost.WithoutMknod())
			tc.tweak(t, tree)
			host, err := discover.Discover(tree.DiscoverOptions()...)
			if tc.want == "" {
				require.NoError(t, err, "no xpu-smi is a warning")
				require.Empty(t, host.Tools)
				require.Contains(t, strings.Join(host.Warnings, "\n"), "xpu-smi not found under driver root "+tree.Root)
				return
			}
			require.NoError(t, err)
			require.Len(t, host.Tools, 1)
			require.Equal(t, discover.ToolPath, host.Tools[0].Path)
			want := tc.want
			if want == xpuSMI {
				want = tree.XREDir + xpuSMI
			}
			require.Equal(t, tree.Path(want), host.Tools[0].HostPath)
		})
	}
}
