package testreq

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// harnessImport is the end-to-end harness; it links client-go, containerd's
// clients and the rest of the e2e world into any test binary importing it.
const harnessImport = "github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"

// skipOwners may skip: this package, and testutil's test of FakeTB.Skipf.
var skipOwners = []string{"internal/testreq", "internal/testutil"}

// unitDirs hold the unit tests (make unit).
var unitDirs = []string{"pkg", "internal", "cmd", "deployments"}

// TestPolicy holds every test of the module to this package's policy: no
// unit test imports the end-to-end harness (they ask testreq for root or a
// tool), and no test skips by itself (t.Skip bypasses the strict mode that
// keeps CI from passing by skipping).
func TestPolicy(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || slices.Contains(skipOwners, filepath.ToSlash(rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		if strings.HasSuffix(path, "_test.go") && inUnitDir(rel) {
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == harnessImport {
					t.Errorf("%s: a unit test imports %s (use internal/testreq)", rel, harnessImport)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && isSkip(sel.Sel.Name) {
				if _, call := sel.X.(*ast.Ident); call {
					t.Errorf("%s: raw %s (use testreq.Missing, Root, Tool or HostInUse)", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk saw the module's Go files")
}

func inUnitDir(rel string) bool {
	first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	for _, d := range unitDirs {
		if first == d {
			return true
		}
	}
	return false
}

func isSkip(name string) bool { return name == "Skip" || name == "Skipf" || name == "SkipNow" }
