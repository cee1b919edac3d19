package testutil

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// retriers are the calls whose function argument is tried again: a failure
// of the test inside it ends the test at the first transient error instead
// of trying again (testify runs the condition on a goroutine of its own, so
// a FailNow there does not even stop the wait).
var retriers = map[string]bool{
	"require.Eventually": true, "require.Eventuallyf": true, "assert.Eventually": true, "assert.Eventuallyf": true,
	"require.Never": true, "require.Neverf": true, "assert.Never": true, "assert.Neverf": true,
	"require.Consistently": true, "assert.Consistently": true,
}

// TestNoTestFailureInRetriedConditions reads every test source of the
// module: no condition of testify's Eventually, Never or Consistently calls
// require, assert or Fatal, or passes the test to a helper (which may fail
// it). Such a condition belongs in Eventually, which gives it a t of its
// own.
func TestNoTestFailureInRetriedConditions(t *testing.T) {
	root := moduleRoot(t)
	var bad []string
	fset := token.NewFileSet()
	for _, dir := range []string{"internal", "pkg", "cmd", "tests"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !retriers[exprName(call.Fun)] {
					return true
				}
				for _, arg := range call.Args {
					if lit, ok := arg.(*ast.FuncLit); ok {
						bad = append(bad, failingCalls(fset, lit)...)
					}
				}
				return true
			})
			return nil
		}))
	}
	require.Empty(t, bad, "a retried condition must treat a failure as \"not yet\": use testutil.Eventually")
}

// failingCalls are the calls in lit that may fail the test: require.*,
// assert.*, t.Fatal*, t.Error*, t.FailNow, and any call given t, b or tb.
func failingCalls(fset *token.FileSet, lit *ast.FuncLit) []string {
	var out []string
	ast.Inspect(lit.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		name := exprName(c.Fun)
		bad := strings.HasPrefix(name, "require.") || strings.HasPrefix(name, "assert.")
		if recv, method, ok := strings.Cut(name, "."); ok && isTestVar(recv) &&
			(strings.HasPrefix(method, "Fatal") || strings.HasPrefix(method, "Error") || method == "FailNow") {
			bad = true
		}
		for _, a := range c.Args {
			if id, ok := a.(*ast.Ident); ok && isTestVar(id.Name) {
				bad = true
			}
		}
		if bad {
			out = append(out, fset.Position(c.Pos()).String()+": "+name)
		}
		return true
	})
	return out
}

func isTestVar(name string) bool { return name == "t" || name == "b" || name == "tb" }

func exprName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprName(x.X) + "." + x.Sel.Name
	}
	return ""
}

func TestFailingCalls(t *testing.T) {
	src := `package p
func f() {
	require.Eventually(t, func() bool { return len(d.records(t)) == 0 }, 1, 1)
	require.Eventually(t, func() bool { require.NoError(t, err); return true }, 1, 1)
	require.Eventually(t, func() bool { if err != nil { t.Fatalf("x") }; return true }, 1, 1)
	require.Eventually(t, func() bool { _, err := os.Stat(p); return err == nil }, 1, 1)
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	require.NoError(t, err)
	var got []string
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.FuncLit); ok {
			for _, s := range failingCalls(fset, lit) {
				got = append(got, s[strings.LastIndex(s, ": ")+2:])
			}
		}
		return true
	})
	require.Equal(t, []string{"d.records", "require.NoError", "t.Fatalf"}, got)
}

// moduleRoot is the directory of go.mod above the package.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the package")
		dir = parent
	}
}
