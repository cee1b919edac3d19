package harness

import (
	"testing"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// DefaultToolsBin and ToolsBinEnv: testreq's, kept here for the e2e tests.
const (
	DefaultToolsBin = testreq.DefaultToolsBin
	ToolsBinEnv     = testreq.ToolsBinEnv
)

// ToolsBin returns the directory holding the Go-built tools: testreq.ToolsBin.
func ToolsBin() string { return testreq.ToolsBin() }

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
