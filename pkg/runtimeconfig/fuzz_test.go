package runtimeconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzContainerdMain feeds arbitrary main files to the containerd text
// edit. Whenever configure accepts a file, the edited file must parse, keep
// every other setting, import the drop-in, and revert to the original bytes.
func FuzzContainerdMain(f *testing.F) {
	for _, s := range []string{
		containerdV2Main, containerdV3Main,
		"version = 3\nimports = []\n",
		"version = 2\nimports = [ # c\n 'a', \"b\",\n]\n[x]\ny=1\n",
		"version=3",
		"# c\r\nversion = 2\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, main []byte) {
		root := t.TempDir()
		mainPath := filepath.Join(root, "config.toml")
		if err := os.WriteFile(mainPath, main, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := New(Containerd, WithConfigPath(mainPath), WithDropInPath(filepath.Join(root, "conf.d", "99-xpu.toml")))
		if err != nil {
			t.Fatal(err)
		}
		plan, err := c.Configure()
		if err != nil {
			return // refused: fine, as long as nothing was written
		}
		if err := plan.Apply(); err != nil {
			t.Fatalf("apply: %v", err)
		}
		edited, err := os.ReadFile(mainPath)
		if err != nil {
			t.Fatal(err)
		}
		before, err1 := parseTOML(mainPath, main)
		after, err2 := parseTOML(mainPath, edited)
		if err1 != nil || err2 != nil {
			t.Fatalf("parse before=%v after=%v", err1, err2)
		}
		entries, _, err := importsList(mainPath, after)
		if err != nil || !containsCover(mainPath, entries, c.o.dropInPath) {
			t.Fatalf("drop-in not imported: %v %v", entries, err)
		}
		delete(before, "imports")
		delete(after, "imports")
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("settings other than imports changed:\n%q\n%q", main, edited)
		}
		rev, err := c.Revert()
		if err != nil {
			t.Fatalf("revert: %v", err)
		}
		if err := rev.Apply(); err != nil {
			t.Fatalf("apply revert: %v", err)
		}
		back, _ := os.ReadFile(mainPath)
		if _, had := mustParse(main)["imports"]; !had && string(back) != string(main) {
			t.Fatalf("revert did not restore the bytes:\n%q\n%q", main, back)
		}
	})
}

func mustParse(b []byte) map[string]any {
	tree, _ := parseTOML("x", b)
	return tree
}
