package generate_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

func refresh(t *testing.T, root string, args ...string) (string, string, error) {
	t.Helper()
	return clitest.Run(t, generate.NewRefreshCommand, append(append([]string{"refresh"}, args...), clitest.Roots(root)...)...)
}

func TestRefreshRemovesOwnSpecWhenXPUsAreGone(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800x8())
	out := filepath.Join(t.TempDir(), "baidu.com-xpu.yaml")
	_, _, err := refresh(t, root, "-o", out)
	require.NoError(t, err)
	require.FileExists(t, out)

	_, logs, err := refresh(t, t.TempDir(), "-o", out)
	require.NoError(t, err, "no XPU must not fail the boot")
	require.NoFileExists(t, out)
	require.Contains(t, logs, "removed "+out)
	require.Contains(t, logs, "no Kunlun XPU found")
	require.NotContains(t, logs, "hint", "the hint is for a user at a terminal, not the unit's log")

	foreign := filepath.Join(t.TempDir(), "other.yaml")
	require.NoError(t, os.WriteFile(foreign, []byte("cdiVersion: \"0.5.0\"\nkind: example.com/gpu\ndevices: []\n"), 0o644))
	_, _, err = refresh(t, t.TempDir(), "-o", foreign)
	require.NoError(t, err)
	require.FileExists(t, foreign, "a spec of another kind is never removed")
}
