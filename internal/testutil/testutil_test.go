package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShortDir(t *testing.T) {
	dir := ShortDir(t, "xtu")
	require.DirExists(t, dir)
	require.True(t, strings.HasPrefix(filepath.Base(dir), "xtu"))
	require.Equal(t, filepath.Clean(os.TempDir()), filepath.Dir(dir))
}

func TestCall(t *testing.T) {
	f := Call(t, func(tb testing.TB) { tb.Skipf("no %s", "tool") })
	require.True(t, f.DidSkip)
	require.False(t, f.DidFail)
	require.Equal(t, "no tool", f.Msg)
	f = Call(t, func(tb testing.TB) { tb.Fatalf("broken") })
	require.True(t, f.DidFail)
	f = Call(t, func(tb testing.TB) {})
	require.False(t, f.DidSkip || f.DidFail)
	require.Panics(t, func() { Call(t, func(testing.TB) { panic("other") }) }, "other panics are not swallowed")
}

func TestGolden(t *testing.T) {
	t.Chdir(t.TempDir())
	require.NoError(t, os.Mkdir("testdata", 0o755))
	require.NoError(t, os.WriteFile("testdata/a.yaml", []byte("a: 1\n"), 0o644))
	Golden(t, "a.yaml", []byte("a: 1\n"))
	f := Call(t, func(tb testing.TB) { Golden(tb, "a.yaml", []byte("a: 2\n")) })
	require.True(t, f.DidFail, "a difference fails")
	f = Call(t, func(tb testing.TB) { Golden(tb, "missing.yaml", nil) })
	require.True(t, f.DidFail)
	require.Contains(t, f.Msg, "go test -update")
	*update = true
	t.Cleanup(func() { *update = false })
	Golden(t, "sub/b.yaml", []byte("b\n"))
	b, err := os.ReadFile("testdata/sub/b.yaml")
	require.NoError(t, err)
	require.Equal(t, "b\n", string(b))
}
