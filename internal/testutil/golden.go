package testutil

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// update is go test's -update flag of every package using Golden.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Golden compares got with the golden file testdata/name of the package
// under test; with -update it writes got there instead (review the diff).
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file %s missing: run go test -update and review it", path)
	require.Equal(t, string(want), string(got), "golden %s differs (run go test -update and review the diff)", path)
}
