package testutil

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// module is the import path prefix of this module's packages.
const module = "github.com/xpu-cdi/xpu-cdi/"

// ModuleImports returns the packages of this module (their paths below
// the module, "internal/partition") that the package in dir imports,
// directly or not, test files left out. root is the module's directory
// and dir is below it: both relative to the test's package or absolute.
func ModuleImports(t testing.TB, root, dir string) map[string]bool {
	t.Helper()
	root, err := filepath.Abs(root)
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
