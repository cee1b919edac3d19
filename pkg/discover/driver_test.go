package discover_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// TestLibraryDirEntries checks what the XRE directory scan makes of each
// kind of entry: real files, links in the directory, links to other
// in-root directories, links out of the root, and files that are not
// libraries.
func TestLibraryDirEntries(t *testing.T) {
	tree := build(t, fakehost.P800x8())
	lib := filepath.Join(tree.Root, tree.XREDir, "lib64")
	rt, err := os.ReadFile(filepath.Join(lib, "libxpurt.so.1"))
	require.NoError(t, err)
	ml, err := os.ReadFile(filepath.Join(lib, "libxpuml.so.1"))
	require.NoError(t, err)

	outside := t.TempDir() // a real library outside the driver root
	require.NoError(t, os.WriteFile(filepath.Join(outside, "libout.so.1"), ml, 0o755))
	other := filepath.Join(tree.Root, "opt", "other")
	require.NoError(t, os.MkdirAll(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "libfar.so.7"), ml, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(lib, "libcopy.so.2"), rt, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(lib, "libnotelf.so.1"), []byte("not an ELF file"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(lib, "libshort.so.1"), []byte("\x7fELF"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(lib, "libdir.so.3"), 0o755))
	for name, target := range map[string]string{
		"libxpurt.so.9": "libxpurt.so.1",                           // one more link to a library
		"libfar.so":     "/opt/other/libfar.so.7",                  // another in-root directory
		"libout.so":     filepath.Join(outside, "libout.so.1"),     // absolute, out of the root
		"libup.so":      "../../../../../../../../../../libout.so", // relative, out of the root
		"libbroken.so":  "nonexistent.so.1",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(lib, name)))
	}

	h, err := discoverTree(t, tree)
	require.NoError(t, err)
	got := map[string]discover.DriverFile{} // by host path
	for _, l := range h.Libraries {
		require.NotContains(t, got, l.HostPath)
		got[l.HostPath] = l
	}
	for _, tc := range []struct {
		description string
		hostPath    string
		want        discover.DriverFile
	}{
		{
			description: "a library with its development link and another link",
			hostPath:    filepath.Join(lib, "libxpurt.so.1"),
			want:        discover.DriverFile{Path: "/usr/local/xpu/lib64/libxpurt.so.1", Soname: "libxpurt.so.1", Links: []string{"libxpurt.so", "libxpurt.so.9"}},
		},
		{
			description: "a copy under another name is a library at its SONAME, without links",
			hostPath:    filepath.Join(lib, "libcopy.so.2"),
			want:        discover.DriverFile{Path: "/usr/local/xpu/lib64/libxpurt.so.1", Soname: "libxpurt.so.1"},
		},
		{
			description: "a link to another in-root directory is followed inside the root",
			hostPath:    filepath.Join(other, "libfar.so.7"),
			want:        discover.DriverFile{Path: "/usr/local/xpu/lib64/libxpuml.so.1", Soname: "libxpuml.so.1", Links: []string{"libfar.so"}},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			l, ok := got[tc.hostPath]
			require.True(t, ok, "no library backed by %s in %v", tc.hostPath, h.Libraries)
			tc.want.Kind, tc.want.HostPath = discover.KindLibrary, tc.hostPath
			require.Equal(t, tc.want, l)
		})
	}
	for _, l := range h.Libraries {
		require.True(t, filepath.IsAbs(l.HostPath) && isBelow(l.HostPath, tree.Root), "%s is outside the driver root", l.HostPath)
		for _, n := range append([]string{filepath.Base(l.HostPath)}, l.Links...) {
			require.NotContains(t, []string{"libnotelf.so.1", "libshort.so.1", "libdir.so.3", "libout.so", "libup.so", "libbroken.so"}, n)
		}
	}
}

func isBelow(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != "../")
}
