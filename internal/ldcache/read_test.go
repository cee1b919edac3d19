package ldcache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

func TestReadFileBounds(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	_, err := ReadFile(fifo, 1<<20)
	require.ErrorIs(t, err, fdio.ErrNotRegular, "a FIFO is refused without blocking")
	_, err = ReadFile(dir, 1<<20)
	require.ErrorIs(t, err, fdio.ErrNotRegular)

	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, nil, 0o644))
	require.NoError(t, os.Truncate(big, 10<<30))
	_, err = ReadFile(big, 1<<20)
	require.ErrorIs(t, err, ErrTooLarge)

	ok := filepath.Join(dir, "ok")
	require.NoError(t, os.WriteFile(ok, []byte("abc"), 0o644))
	data, err := ReadFile(ok, 3)
	require.NoError(t, err)
	require.Equal(t, "abc", string(data))
}

func TestParseMax(t *testing.T) {
	entries := []Entry{
		{Name: "liba.so.1", Path: "/lib/liba.so.1", Flags: FlagELFLibc6 | FlagX8664Lib64},
		{Name: "libb.so.1", Path: "/lib/libb.so.1", Flags: FlagELFLibc6 | FlagX8664Lib64},
	}
	data, err := Encode(entries)
	require.NoError(t, err)
	got, err := ParseMax(data, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	_, err = ParseMax(data, 1)
	require.ErrorIs(t, err, ErrTooManyEntries)
	got, err = ParseMax(data, -1)
	require.NoError(t, err)
	require.Len(t, got, 2)
}
