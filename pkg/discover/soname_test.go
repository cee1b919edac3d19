package discover

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// elfSoname is the reference: what debug/elf says.
func elfSoname(path string) (string, bool) {
	f, err := elf.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return "", false
	}
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 {
		return "", false
	}
	return names[0], true
}

// TestReadSonameMatchesDebugELF compares readSoname with debug/elf on every
// shared object of the host's library directories.
func TestReadSonameMatchesDebugELF(t *testing.T) {
	var files []string
	for _, pattern := range []string{"/usr/lib/x86_64-linux-gnu/*.so*", "/lib/x86_64-linux-gnu/*.so*", "/usr/lib/aarch64-linux-gnu/*.so*", "/usr/lib64/*.so*", "/usr/local/go/pkg/tool/*/*"} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skip("no shared objects on this host")
	}
	checked := 0
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		want, ok := elfSoname(f)
		got, err := readSoname(f)
		if ok {
			require.NoError(t, err, f)
			require.Equal(t, want, got, f)
			checked++
		} else {
			require.Error(t, err, "%s: debug/elf finds no SONAME, readSoname found %q", f, got)
		}
	}
	require.NotZero(t, checked)
	t.Logf("%d shared objects with a SONAME compared", checked)
}

func FuzzSonameOf(f *testing.F) {
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libz.so.1"} {
		if data, err := os.ReadFile(p); err == nil && len(data) < 4<<20 {
			f.Add(data[:min(len(data), 16<<10)])
		}
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := sonameOf(bytes.NewReader(data))
		if err != nil {
			return
		}
		// Whatever it accepts, debug/elf must read the same name.
		ef, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return // debug/elf is stricter about section headers
		}
		names, err := ef.DynString(elf.DT_SONAME)
		if err == nil && len(names) > 0 {
			require.Equal(t, names[0], got)
		}
	})
}
