package shim

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/config"
)

// generateSpec runs `xpu-cdi generate` itself for the fake host at root,
// writing dir/<vendor>-xpu.yaml.
func generateSpec(t *testing.T, root, dir string, extra ...string) {
	t.Helper()
	log := logrus.New()
	log.SetOutput(&bytes.Buffer{})
	app := &cli.App{Name: "xpu-cdi", Commands: []*cli.Command{generate.NewCommand(log)}, Writer: &bytes.Buffer{}}
	args := append([]string{
		"xpu-cdi", "generate", "--dev-root", root, "--driver-root", root,
		"--output", filepath.Join(dir, "baidu.com-xpu.yaml"),
	}, extra...)
	require.NoError(t, app.Run(args))
}

// TestJITMatchesGenerator checks that the jit mode gives a container the
// same OCI spec as the CDI library applying the spec that `xpu-cdi
// generate` writes for the same host, and that the cdi and auto modes use
// that spec. The generator stats real device nodes: root only.
func TestJITMatchesGenerator(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the generator reads real device nodes (mknod)")
	}
	tree := fakehosttest.Build(t, fakehost.P800x8())

	for _, tc := range []struct {
		description string
		genArgs     []string
		config      func(*config.Config)
	}{
		{description: "defaults"},
		{description: "nodes only", genArgs: []string{"--nodes-only"}, config: func(c *config.Config) { c.NodesOnly = true }},
		{description: "no hooks", genArgs: []string{"--no-hooks"}, config: func(c *config.Config) { c.NoHooks = true }},
		{description: "hook path", genArgs: []string{"--hook-path", "/opt/x/hook"}, config: func(c *config.Config) { c.HookPath = "/opt/x/hook" }},
	} {
		t.Run(tc.description, func(t *testing.T) {
			specDir := t.TempDir()
			generateSpec(t, tree.Root, specDir, tc.genArgs...)
			spec := bundleSpec(true, map[string]string{"cdi.k8s.io/x": "baidu.com/xpu=5"}, "XPU_VISIBLE_DEVICES=3,0000:01:00.0,all")
			names := []string{"baidu.com/xpu=5", "baidu.com/xpu=3", "baidu.com/xpu=0000:01:00.0", "baidu.com/xpu=all"}

			// What the CDI library does with the generated spec.
			cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(specDir), cdiapi.WithAutoRefresh(false))
			require.NoError(t, err)
			want := bundleSpec(true, map[string]string{"cdi.k8s.io/x": "baidu.com/xpu=5"}, "XPU_VISIBLE_DEVICES=3,0000:01:00.0,all")
			_, err = cache.InjectDevices(want, names...)
			require.NoError(t, err)
			setVisibleDevices(want.Process, "0,1,2,3,4,5,6,7")

			for _, mode := range []config.Mode{config.ModeJIT, config.ModeCDI, config.ModeAuto} {
				c := jitConfig(tree.Root)
				c.Mode = mode
				c.SpecDirs = []string{specDir}
				if tc.config != nil {
					tc.config(c)
				}
				dir, _ := writeBundle(t, spec)
				res, err := ModifyBundle(dir, c)
				require.NoError(t, err, mode)
				wantMode := mode
				if mode == config.ModeAuto {
					wantMode = config.ModeCDI
				}
				require.Equal(t, wantMode, res.Mode)
				require.Equal(t, want, readBundle(t, dir), "mode %s differs from the generator's spec applied by the CDI library", mode)
			}
		})
	}
}

// TestAutoMode: without a spec of the kind, auto discovers the host.
func TestAutoModeFallsBackToJIT(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.K200())
	specDir := t.TempDir()
	// A spec of another kind does not count.
	require.NoError(t, os.WriteFile(filepath.Join(specDir, "other.yaml"), []byte("cdiVersion: 0.5.0\nkind: example.com/gpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    env: [A=1]\n"), 0o644))
	c := jitConfig(tree.Root)
	c.Mode = config.ModeAuto
	c.SpecDirs = []string{specDir}
	dir, _ := writeBundle(t, bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=1"))
	res, err := ModifyBundle(dir, c, seam)
	require.NoError(t, err)
	require.Equal(t, config.ModeJIT, res.Mode)
	require.Equal(t, []int{1}, res.Devices)
}
