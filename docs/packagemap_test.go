package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// layers of docs/design.md's package table, bottom up; testSupport is
// apart: it may import any layer but command, and no shipped package
// imports it.
var layers = []string{"support", "host model", "component", "command"}

const testSupport = "test support"

var (
	// designRow is a row of the table: | `internal/x` | layer | job |.
	designRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ([a-z ]+) \\|")
	// mapLine is a layer's line of development.md's map.
	mapLine = regexp.MustCompile(`(?m)^- \*\*([a-z ]+)\*\*: (.+)$`)
	mapName = regexp.MustCompile("`([^`]+)`")
)

// TestPackageMap: every package under internal/, pkg/ and cmd/ has a row in
// docs/design.md's table and is named under the same layer in
// docs/development.md's map; every row names a package; no package imports
// one of a higher layer or test support (test support imports no command).
func TestPackageMap(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	module := modulePath(t, root)
	pkgs := goPackages(t, root, module)
	require.Contains(t, pkgs, "pkg/discover", "the walk found the module's packages")

	design := readDoc(t, root, "design.md")
	layerOf := map[string]string{}
	for _, m := range designRow.FindAllStringSubmatch(design, -1) {
		name, layer := m[1], m[2]
		if layer != testSupport && !slices.Contains(layers, layer) {
			t.Errorf("docs/design.md: the row of %s has layer %q; use one of %q or %q", name, layer, layers, testSupport)
		}
		layerOf[name] = layer
	}
	mapped := map[string]string{}
	for _, m := range mapLine.FindAllStringSubmatch(readDoc(t, root, "development.md"), -1) {
		for _, n := range mapName.FindAllStringSubmatch(m[2], -1) {
			mapped[n[1]] = m[1]
		}
	}

	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		layer, ok := layerOf[p]
		if !ok {
			t.Errorf("docs/design.md, ## Packages: no row for %s; add \"| `%s` | LAYER | its one job |\" (LAYER one of %q or %q)", p, p, layers, testSupport)
			continue
		}
		if got, ok := mapped[p]; !ok || got != layer {
			t.Errorf("docs/development.md, ## The map: %s is not named in the line \"- **%s**: ...\"", p, layer)
		}
		for _, imp := range pkgs[p] {
			il, ok := layerOf[imp]
			if !ok {
				continue // reported as a missing row
			}
			if msg := layerBreach(layer, il); msg != "" {
				t.Errorf("%s (%s) imports %s (%s): %s; move one of them, or fix the layers in docs/design.md", p, layer, imp, il, msg)
			}
		}
	}
	for name := range layerOf {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("docs/design.md, ## Packages: the row of %s names no package of the tree; remove it", name)
		}
	}
	for name := range mapped {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("docs/development.md, ## The map: %s names no package of the tree; remove it", name)
		}
	}
}

// layerBreach says what is wrong with a package of layer from importing one
// of layer to, or "" when the import keeps the layers.
func layerBreach(from, to string) string {
	switch {
	case from == testSupport:
		if to == "command" {
			return "test support imports no command"
		}
	case to == testSupport:
		return "a shipped package imports test support"
	case slices.Index(layers, to) > slices.Index(layers, from):
		return "an import runs up the layers"
	}
	return ""
}

func TestLayerBreach(t *testing.T) {
	require.Empty(t, layerBreach("component", "support"))
	require.Empty(t, layerBreach("command", "command"))
	require.Empty(t, layerBreach(testSupport, "component"))
	require.NotEmpty(t, layerBreach("support", "component"))
	require.NotEmpty(t, layerBreach("command", testSupport))
	require.NotEmpty(t, layerBreach(testSupport, "command"))
}

func readDoc(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", name))
	require.NoError(t, err)
	return string(b)
}

func modulePath(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if mod, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(mod)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// goPackages maps each package directory under internal/, pkg/ and cmd/
// (relative, slash-separated) that has non-test Go files to the module
// packages its non-test files import (all build tags together).
func goPackages(t *testing.T, root, module string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string][]string{}
	for _, top := range []string{"internal", "pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			imps := pkgs[rel]
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if dep, ok := strings.CutPrefix(p, module+"/"); ok && !slices.Contains(imps, dep) {
					imps = append(imps, dep)
				}
			}
			pkgs[rel] = imps
			return nil
		})
		require.NoError(t, err)
	}
	return pkgs
}
