package xpurequest

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/xpu-cdi/xpu-cdi/"

// moduleImports returns the packages of this module that the package in
// dir imports, directly or not (test files left out).
func moduleImports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	seen := map[string]bool{}
	var walk func(string)
	walk = func(d string) {
		p, err := build.ImportDir(d, 0)
		require.NoError(t, err, d)
		for _, imp := range p.Imports {
			rel, ok := strings.CutPrefix(imp, module)
			if !ok || seen[rel] {
				continue
			}
			seen[rel] = true
			walk(filepath.Join(root, rel))
		}
	}
	walk(dir)
	return seen
}

// The device plugin and the shim share these names through this package,
// and neither links the other: one definition, so the two cannot drift.
func TestOneHomeForTheSharedNames(t *testing.T) {
	plugin := moduleImports(t, "../deviceplugin")
	shim := moduleImports(t, "../shim")
	require.True(t, plugin["internal/xpurequest"], "internal/deviceplugin uses internal/xpurequest")
	require.True(t, shim["internal/xpurequest"], "internal/shim uses internal/xpurequest")
	require.False(t, plugin["internal/shim"], "internal/deviceplugin imports internal/shim")
	require.False(t, shim["internal/deviceplugin"], "internal/shim imports internal/deviceplugin")
}
