package ldcache

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// buildLib compiles a shared library with the given SONAME to out, whose
// function name() returns msg.
func buildLib(t testing.TB, out, soname, fn, msg string) {
	t.Helper()
	require.NoError(t, testenv.BuildSharedLibrary(testreq.Tool(t, "gcc"), out, soname, "const char *"+fn+"(void) { return \""+msg+"\"; }\n"))
}
