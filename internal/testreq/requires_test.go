package testreq

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeTB records Skipf/Fatalf instead of acting on them; both stop the
// calling function with a panic, as the real ones stop the goroutine.
type fakeTB struct {
	testing.TB
	skipped, fatal bool
	msg            string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	panic("skip")
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal, f.msg = true, fmt.Sprintf(format, args...)
	panic("fatal")
}

// call runs fn with a fakeTB, stopping where Skipf or Fatalf would stop.
func call(t *testing.T, fn func(testing.TB)) *fakeTB {
	ft := &fakeTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		fn(ft)
	}()
	return ft
}

func TestStrictness(t *testing.T) {
	for _, tc := range []struct {
		description string
		env         map[string]string
		wantFatal   bool
	}{
		{"laptop skips", map[string]string{"CI": "", StrictEnv: ""}, false},
		{"CI fails", map[string]string{"CI": "true", StrictEnv: ""}, true},
		{"XPU_E2E_REQUIRE fails", map[string]string{"CI": "", StrictEnv: "1"}, true},
		{"CI=false skips", map[string]string{"CI": "false", StrictEnv: "0"}, false},
	} {
		t.Run(tc.description, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			require.Equal(t, tc.wantFatal, Strict())

			ft := call(t, func(tb testing.TB) { Tool(tb, "xpu-cdi-no-such-tool") })
			require.Equal(t, tc.wantFatal, ft.fatal)
			require.Equal(t, !tc.wantFatal, ft.skipped)
			require.Contains(t, ft.msg, "xpu-cdi-no-such-tool")
			require.Contains(t, ft.msg, "hack/install-deps.sh")

			ft = call(t, func(tb testing.TB) { Missing(tb, "no %s on this host", "/etc/ld.so.cache") })
			require.Equal(t, tc.wantFatal, ft.fatal)
			require.Equal(t, !tc.wantFatal, ft.skipped)
			require.Contains(t, ft.msg, "no /etc/ld.so.cache on this host")

			ft = call(t, func(tb testing.TB) { HostInUse(tb, "systemd runs here") })
			require.Equal(t, tc.wantFatal, ft.fatal)
			require.Equal(t, !tc.wantFatal, ft.skipped)
			require.Contains(t, ft.msg, "systemd runs here")
		})
	}
}

func TestPresentPrerequisites(t *testing.T) {
	t.Setenv("CI", "true")
	ft := call(t, func(tb testing.TB) { require.Equal(tb, "/bin/sh", Tool(tb, "/bin/sh")) })
	require.False(t, ft.fatal || ft.skipped, ft.msg)

	ft = call(t, func(tb testing.TB) {
		p := Tool(tb, "sh")
		require.True(tb, len(p) > 0 && p[0] == '/', "Tool returns an absolute path, got %q", p)
	})
	require.False(t, ft.fatal || ft.skipped, ft.msg)

	ft = call(t, func(tb testing.TB) { Root(tb, "testing Root") })
	require.Equal(t, os.Geteuid() != 0, ft.fatal, ft.msg)
	if os.Geteuid() != 0 {
		require.Contains(t, ft.msg, "testing Root")
		require.Contains(t, ft.msg, "run the tests as root")
	}
}

// InstalledTool prefers make deps's build in ToolsBin to PATH's.
func TestInstalledTool(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(dir+"/sh", []byte("#!/bin/sh\n"), 0o755))
	t.Setenv(ToolsBinEnv, dir)
	require.Equal(t, dir, ToolsBin())
	require.Equal(t, dir+"/sh", InstalledTool(t, "sh"))
	t.Setenv(ToolsBinEnv, t.TempDir())
	require.NotEqual(t, dir+"/sh", InstalledTool(t, "sh"), "PATH's when ToolsBin has none")
}
