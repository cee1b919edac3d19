package list_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/list"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio/fdiotest"
)

func TestList(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.R200SRIOV())
	dir := t.TempDir()
	_, _, err := clitest.Run(t, generate.NewCommand, append([]string{"generate", "-o", filepath.Join(dir, "x.yaml"), "--vendor", "list.xpu-cdi.test"}, clitest.Roots(root)...)...)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("kind: [\n"), 0o644))
	stdout, logs, err := clitest.Run(t, list.NewCommand, "list", "--spec-dir", dir)
	require.NoError(t, err)
	require.Contains(t, stdout, "list.xpu-cdi.test/xpu=1\n")
	require.Contains(t, stdout, "list.xpu-cdi.test/xpu=all\n")
	require.NotContains(t, stdout, "list.xpu-cdi.test/xpu=0\n", "the PF with VFs is not offered")
	require.Contains(t, logs, "broken.yaml")
}

func TestListNothing(t *testing.T) {
	dir := t.TempDir()
	stdout, logs, err := clitest.Run(t, list.NewCommand, "list", "--spec-dir", dir)
	require.NoError(t, err, "an empty directory is not an error")
	require.Empty(t, stdout)
	require.Contains(t, logs, "no CDI device found in ["+dir+"]")
}

// TestListHostileSpecFiles: a FIFO named other.yaml, or a link to
// /dev/zero, in a spec directory is a warning naming it, at once; the
// other specs are listed.
func TestListHostileSpecFiles(t *testing.T) {
	for _, tc := range fdiotest.HostileFiles() {
		t.Run(tc.Description, func(t *testing.T) {
			dir := t.TempDir()
			spec := "cdiVersion: 0.6.0\nkind: list.xpu-cdi.test/xpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    env: [\"A=1\"]\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(spec), 0o644))
			require.NoError(t, tc.Plant(filepath.Join(dir, "other.yaml")))
			type result struct {
				stdout, logs string
				err          error
			}
			r := fdiotest.Within(t, "list", func() result {
				stdout, logs, err := clitest.Run(t, list.NewCommand, "list", "--spec-dir", dir)
				return result{stdout, logs, err}
			})
			require.NoError(t, r.err)
			require.Equal(t, "list.xpu-cdi.test/xpu=0\n", r.stdout)
			require.Contains(t, r.logs, filepath.Join(dir, "other.yaml"))
			require.Contains(t, r.logs, "not a regular file")
		})
	}
}

// TestListWarnsOfShadowedSpecs: README's /etc/cdi spec under the refresh
// service's /var/run/cdi one: the devices are listed once, and a warning
// names the spec that is never used and the one the engines take.
func TestListWarnsOfShadowedSpecs(t *testing.T) {
	root := clitest.FakeHost(t, fakehost.P800x8())
	etc, run := t.TempDir(), t.TempDir()
	for _, dir := range []string{etc, run} {
		_, _, err := clitest.Run(t, generate.NewCommand, append([]string{"generate", "-o", filepath.Join(dir, "baidu.com-xpu.yaml")}, clitest.Roots(root)...)...)
		require.NoError(t, err)
	}
	stdout, logs, err := clitest.Run(t, list.NewCommand, "list", "--spec-dir", etc, "--spec-dir", run)
	require.NoError(t, err)
	require.Contains(t, stdout, "baidu.com/xpu=7\n")
	require.Contains(t, logs, filepath.Join(etc, "baidu.com-xpu.yaml")+" is shadowed by "+filepath.Join(run, "baidu.com-xpu.yaml"))
	require.Contains(t, logs, "engines use "+filepath.Join(run, "baidu.com-xpu.yaml"))

	// One spec: no warning.
	_, logs, err = clitest.Run(t, list.NewCommand, "list", "--spec-dir", run)
	require.NoError(t, err)
	require.NotContains(t, logs, "shadowed")
}
