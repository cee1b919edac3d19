package elfso

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// buildLib compiles a shared library with the given SONAME to out, whose
// function name() returns msg.
func buildLib(t testing.TB, out, soname, fn, msg string) {
	t.Helper()
	gcc := testreq.Tool(t, "gcc")
	src := filepath.Join(t.TempDir(), "lib.c")
	require.NoError(t, os.WriteFile(src, []byte("const char *"+fn+"(void) { return \""+msg+"\"; }\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	cmd := exec.Command(gcc, "-shared", "-fPIC", "-o", out, "-Wl,-soname,"+soname, src)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "gcc: %s", b)
}
