package fakehost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func readTree(t *testing.T, tr *Tree, p string) string {
	t.Helper()
	b, err := os.ReadFile(tr.Path(p))
	require.NoError(t, err)
	return string(b)
}

func exists(tr *Tree, p string) bool {
	_, err := os.Lstat(tr.Path(p))
	return err == nil
}

// within reports whether path is root or below it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func build(t *testing.T, h Host, opts ...Option) *Tree {
	t.Helper()
	tr, err := Build(t.TempDir(), h, opts...)
	require.NoError(t, err)
	return tr
}
