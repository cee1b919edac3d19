package deployments

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cmd/binaries.txt is the one list of the binaries: every command of cmd/
// is in it, once, with where it ships and its man page's line, and the
// image and the packages take it from there instead of naming binaries.
func TestBinariesList(t *testing.T) {
	data, err := os.ReadFile("../cmd/binaries.txt")
	require.NoError(t, err)
	var listed []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		require.GreaterOrEqual(t, len(f), 3, "cmd/binaries.txt: %q needs a name, where it ships and a description", line)
		for _, w := range strings.Split(f[1], ",") {
			require.Contains(t, []string{"pkg", "image"}, w, "cmd/binaries.txt: %s ships in %q", f[0], w)
		}
		require.NotContains(t, listed, f[0], "cmd/binaries.txt names %s twice", f[0])
		listed = append(listed, f[0])
	}
	entries, err := os.ReadDir("../cmd")
	require.NoError(t, err)
	var commands []string
	for _, e := range entries {
		if matches, _ := filepath.Glob(filepath.Join("../cmd", e.Name(), "*.go")); e.IsDir() && len(matches) > 0 {
			commands = append(commands, e.Name())
		}
	}
	slices.Sort(listed)
	require.Equal(t, commands, listed, "cmd/binaries.txt lists the commands of cmd/")

	for _, f := range []string{"Containerfile", "../packaging/stage.sh", "../Makefile"} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotContains(t, string(data), "xpu-container-runtime", "%s names the binaries instead of reading cmd/binaries.txt", f)
	}
}
