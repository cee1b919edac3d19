package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// DefaultToolsBin is where hack/install-deps.sh installs Go-built tools
// (containerd 2.x, ctr, containerd-shim-runc-v2, crictl, golangci-lint).
const DefaultToolsBin = "/usr/local/lib/xpu-cdi-tools/bin"

// ToolsBinEnv overrides DefaultToolsBin (the same variable the install script reads).
const ToolsBinEnv = "XPU_CDI_TOOLS_BIN"

const installHint = "run hack/install-deps.sh as root to install the e2e prerequisites"

// ToolsBin returns the directory holding the Go-built tools.
func ToolsBin() string {
	if dir := os.Getenv(ToolsBinEnv); dir != "" {
		return dir
	}
	return DefaultToolsBin
}

// Strict reports whether missing prerequisites must fail tests instead of
// skipping them: CI=true or XPU_E2E_REQUIRE=1.
func Strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv("XPU_E2E_REQUIRE") == "1"
}

// missing skips the test, or fails it in strict mode.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if Strict() {
		t.Fatalf("e2e prerequisite missing (CI=true or XPU_E2E_REQUIRE=1 forbids skipping; "+installHint+"): "+format, args...)
	}
	t.Skipf("e2e prerequisite missing ("+installHint+"): "+format, args...)
}

// RequiresRoot skips the test when not running as root (fails it in strict mode).
func RequiresRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "test needs root, running as uid %d", os.Geteuid())
	}
}

// RequiresTool returns the absolute path of the executable name (looked up in
// PATH, or checked as given when it contains a slash), skipping the test
// (failing it in strict mode) when it is not there.
func RequiresTool(t testing.TB, name string) string {
	t.Helper()
	path, err := lookTool(name)
	if err != nil {
		missing(t, "tool %s not found: %v", name, err)
	}
	return path
}

func lookTool(name string) (string, error) {
	if filepath.IsAbs(name) {
		if _, err := exec.LookPath(name); err != nil {
			return "", err
		}
		return name, nil
	}
	return exec.LookPath(name)
}
