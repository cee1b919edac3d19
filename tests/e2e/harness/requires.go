package harness

import (
	"os"
	"testing"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// DefaultToolsBin is where hack/install-deps.sh installs Go-built tools
// (containerd 2.x, ctr, containerd-shim-runc-v2, crictl, golangci-lint).
const DefaultToolsBin = "/usr/local/lib/xpu-cdi-tools/bin"

// ToolsBinEnv overrides DefaultToolsBin (the same variable the install script reads).
const ToolsBinEnv = "XPU_CDI_TOOLS_BIN"

// ToolsBin returns the directory holding the Go-built tools.
func ToolsBin() string {
	if dir := os.Getenv(ToolsBinEnv); dir != "" {
		return dir
	}
	return DefaultToolsBin
}

// RequiresRoot skips the test when not running as root (fails it in strict
// mode): testreq.Root, kept here because every e2e test calls it.
func RequiresRoot(t testing.TB) {
	t.Helper()
	testreq.Root(t, "e2e tests run container engines and make device nodes")
}

// RequiresTool returns the absolute path of the executable name (looked up in
// PATH, or checked as given when it contains a slash), skipping the test
// (failing it in strict mode) when it is not there: testreq.Tool.
func RequiresTool(t testing.TB, name string) string {
	t.Helper()
	return testreq.Tool(t, name)
}
