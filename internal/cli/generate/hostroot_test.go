package generate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// TestGenerateHostRoot: read through --host-root, the spec names every host
// path as the host sees it: the same spec as generated on the host itself,
// each host path without the root.
func TestGenerateHostRoot(t *testing.T) {
	run := func(args ...string) (string, error) {
		t.Helper()
		out, _, err := clitest.Run(t, generate.NewCommand, append([]string{"generate"}, args...)...)
		return out, err
	}
	for _, shape := range []fakehost.Host{fakehost.P800x8(), fakehost.P800XRE5()} {
		t.Run(shape.Shape, func(t *testing.T) {
			root := clitest.FakeHost(t, shape)
			viaRoot, err := run("--format", "json", "--host-root", root)
			require.NoError(t, err)
			onHost, err := run(append([]string{"--format", "json"}, clitest.Roots(root)...)...)
			require.NoError(t, err)
			require.NotContains(t, viaRoot, root, "no host path names the root it was read through")
			require.Equal(t, strings.ReplaceAll(onHost, `"`+root+`/`, `"/`), viaRoot)
			spec, err := cdispec.Parse([]byte(viaRoot))
			require.NoError(t, err)
			require.Contains(t, viaRoot, `"hostPath": "/dev/xpu0"`)
			require.NotEmpty(t, spec.ContainerEdits.Mounts)
			for _, m := range spec.ContainerEdits.Mounts {
				_, err := os.Stat(filepath.Join(root, m.HostPath))
				require.NoError(t, err, "host path %s exists below the root", m.HostPath)
			}
		})
	}
	root := clitest.FakeHost(t, fakehost.P800x8())
	_, err := run("--host-root", root, "--dev-root", root)
	require.ErrorContains(t, err, "--host-root "+root+" and --dev-root both say where the host is")
	_, err = run("--host-root", filepath.Join(root, "missing"))
	require.ErrorContains(t, err, "--host-root "+filepath.Join(root, "missing"))
}
