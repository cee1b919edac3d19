package testreq

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

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

			ft := testutil.Call(t, func(tb testing.TB) { Tool(tb, "xpu-cdi-no-such-tool") })
			require.Equal(t, tc.wantFatal, ft.DidFail)
			require.Equal(t, !tc.wantFatal, ft.DidSkip)
			require.Contains(t, ft.Msg, "xpu-cdi-no-such-tool")
			require.Contains(t, ft.Msg, "hack/install-deps.sh")

			ft = testutil.Call(t, func(tb testing.TB) { Missing(tb, "no %s on this host", "/etc/ld.so.cache") })
			require.Equal(t, tc.wantFatal, ft.DidFail)
			require.Equal(t, !tc.wantFatal, ft.DidSkip)
			require.Contains(t, ft.Msg, "no /etc/ld.so.cache on this host")

			ft = testutil.Call(t, func(tb testing.TB) { HostInUse(tb, "systemd runs here") })
			require.Equal(t, tc.wantFatal, ft.DidFail)
			require.Equal(t, !tc.wantFatal, ft.DidSkip)
			require.Contains(t, ft.Msg, "systemd runs here")
		})
	}
}

func TestPresentPrerequisites(t *testing.T) {
	t.Setenv("CI", "true")
	ft := testutil.Call(t, func(tb testing.TB) { require.Equal(tb, "/bin/sh", Tool(tb, "/bin/sh")) })
	require.False(t, ft.DidFail || ft.DidSkip, ft.Msg)

	ft = testutil.Call(t, func(tb testing.TB) {
		p := Tool(tb, "sh")
		require.True(tb, len(p) > 0 && p[0] == '/', "Tool returns an absolute path, got %q", p)
	})
	require.False(t, ft.DidFail || ft.DidSkip, ft.Msg)

	ft = testutil.Call(t, func(tb testing.TB) { Root(tb, "testing Root") })
	require.Equal(t, os.Geteuid() != 0, ft.DidFail, ft.Msg)
	if os.Geteuid() != 0 {
		require.Contains(t, ft.Msg, "testing Root")
		require.Contains(t, ft.Msg, "run the tests as root")
	}
}

func TestFUSE(t *testing.T) {
	t.Setenv("CI", "true")
	ft := testutil.Call(t, func(tb testing.TB) { FUSE(tb, "testing FUSE") })
	want := os.Geteuid() != 0 || fuseAvailable() != nil
	require.Equal(t, want, ft.DidFail, ft.Msg)
	if want {
		require.Contains(t, ft.Msg, "testing FUSE")
		require.Contains(t, ft.Msg, "FUSE")
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

// TestTrixieRoot: the Debian 13 root counts only with the install script's
// recipe file next to it and the engines in it; otherwise the test is told
// (skipped, or failed in strict mode) how to build it.
func TestTrixieRoot(t *testing.T) {
	t.Setenv("CI", "true")
	dir := t.TempDir()
	root := dir + "/trixie"
	t.Setenv(TrixieRootEnv, root)
	for _, bin := range []string{"usr/bin/podman", "usr/sbin/dockerd", "usr/bin/containerd", "usr/sbin/runc", "usr/bin/apt"} {
		require.NoError(t, os.MkdirAll(root+"/"+bin[:len(bin)-len(filepath.Base(bin))], 0o755))
		require.NoError(t, os.WriteFile(root+"/"+bin, nil, 0o755))
	}
	ft := testutil.Call(t, func(tb testing.TB) { TrixieRoot(tb) })
	require.True(t, ft.DidFail, "no recipe file: not built completely")
	require.Contains(t, ft.Msg, "hack/install-deps.sh --only trixie")

	require.NoError(t, os.WriteFile(root+".recipe", []byte("mmdebstrap ...\n"), 0o644))
	ft = testutil.Call(t, func(tb testing.TB) { require.Equal(tb, root, TrixieRoot(tb)) })
	require.False(t, ft.DidFail || ft.DidSkip, ft.Msg)

	require.NoError(t, os.Remove(root+"/usr/sbin/dockerd"))
	ft = testutil.Call(t, func(tb testing.TB) { TrixieRoot(tb) })
	require.True(t, ft.DidFail)
	require.Contains(t, ft.Msg, "has no /usr/sbin/dockerd")
}
