package testreq

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// StrictEnv, set to 1, makes missing prerequisites fail as CI=true does
// (for a developer who wants a run that cannot pass by skipping).
const StrictEnv = "XPU_E2E_REQUIRE"

// The advice given with a missing prerequisite.
const (
	installHint = "run hack/install-deps.sh as root to install the test prerequisites"
	rootHint    = "run the tests as root, e.g. sudo go test"
	hostHint    = "run the tests on a machine where it is not in use, such as CI's"
	fuseHint    = "run the tests as root on a kernel with FUSE (modprobe fuse; /dev/fuse)"
)

// Strict reports whether missing prerequisites must fail tests instead of
// skipping them: CI=true or XPU_E2E_REQUIRE=1.
func Strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv(StrictEnv) == "1"
}

// Missing skips the test, or fails it in strict mode, with a message saying
// which prerequisite is missing (format and args) and how to install it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	missing(t, installHint, format, args...)
}

func missing(t testing.TB, hint, format string, args ...any) {
	t.Helper()
	if Strict() {
		t.Fatalf("test prerequisite missing (CI=true or "+StrictEnv+"=1 forbids skipping; "+hint+"): "+format, args...)
	}
	t.Skipf("test prerequisite missing ("+hint+"): "+format, args...)
}

// HostInUse skips the test, or fails it in strict mode, because running it
// would disturb something this host uses (format and args say what).
func HostInUse(t testing.TB, format string, args ...any) {
	t.Helper()
	missing(t, hostHint, format, args...)
}

// Root skips the test when it does not run as root (fails it in strict
// mode); why says what needs root, for the message.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, rootHint, "needs root (%s), running as uid %d", why, os.Geteuid())
	}
}

// FUSE skips the test (fails it in strict mode) unless it may mount FUSE
// file systems itself: it runs as root, the kernel knows the fuse file
// system type and /dev/fuse opens for reading and writing. why says what
// needs it, for the message.
func FUSE(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, fuseHint, "needs root to mount FUSE (%s), running as uid %d", why, os.Geteuid())
		return
	}
	if err := fuseAvailable(); err != nil {
		missing(t, fuseHint, "needs FUSE (%s): %v", why, err)
	}
}

// fuseAvailable reports why this machine cannot serve a FUSE mount.
func fuseAvailable() error {
	fsTypes, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(string(fsTypes)), "fuse") {
		return errors.New("the kernel has no fuse file system (not in /proc/filesystems)")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// Tool returns the absolute path of the executable name (looked up in PATH,
// or checked as given when it contains a slash), skipping the test (failing
// it in strict mode) when it is not there.
func Tool(t testing.TB, name string) string {
	t.Helper()
	path, err := lookTool(name)
	if err != nil {
		Missing(t, "tool %s not found: %v", name, err)
	}
	return path
}

// DefaultToolsBin is where hack/install-deps.sh installs the Go-built tools
// (containerd 2.x, ctr, crictl, CRI-O, helm, golangci-lint).
const DefaultToolsBin = "/usr/local/lib/xpu-cdi-tools/bin"

// ToolsBinEnv overrides DefaultToolsBin (the variable the install script reads).
const ToolsBinEnv = "XPU_CDI_TOOLS_BIN"

// ToolsBin returns the directory holding the Go-built tools.
func ToolsBin() string {
	if dir := os.Getenv(ToolsBinEnv); dir != "" {
		return dir
	}
	return DefaultToolsBin
}

// InstalledTool is Tool for a tool make deps builds: the one in ToolsBin
// when it is there, else PATH's.
func InstalledTool(t testing.TB, name string) string {
	t.Helper()
	if path, err := lookTool(filepath.Join(ToolsBin(), name)); err == nil {
		return path
	}
	return Tool(t, name)
}

func lookTool(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	return filepath.Abs(path)
}

// DefaultTrixieRoot is where hack/install-deps.sh (group trixie) keeps the
// Debian 13 root file system of trixie's engines; TrixieRootEnv overrides it
// (the variable the install script reads).
const (
	DefaultTrixieRoot = "/var/cache/xpu-cdi/trixie"
	TrixieRootEnv     = "XPU_CDI_TRIXIE_ROOT"
)

// TrixieRoot returns the Debian 13 root file system the install script
// built, skipping the test (failing it in strict mode) unless it is there
// complete: the script writes its recipe file next to it only once
// mmdebstrap succeeded.
func TrixieRoot(t testing.TB) string {
	t.Helper()
	root := DefaultTrixieRoot
	if dir := os.Getenv(TrixieRootEnv); dir != "" {
		root = dir
	}
	if _, err := os.Stat(root + ".recipe"); err != nil {
		Missing(t, "the Debian 13 root file system %s is not built (hack/install-deps.sh --only trixie): %v", root, err)
		return ""
	}
	for _, bin := range []string{"usr/bin/podman", "usr/sbin/dockerd", "usr/bin/containerd", "usr/sbin/runc", "usr/bin/apt"} {
		if _, err := os.Stat(filepath.Join(root, bin)); err != nil {
			Missing(t, "the Debian 13 root file system %s has no /%s: build it again (hack/install-deps.sh --only trixie): %v", root, bin, err)
			return ""
		}
	}
	return root
}
