package shim

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/config"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
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

// generatorRequest is a container's XPU request and the qualified names
// it comes to, in the order the shim resolves them (annotations, then the
// variable).
type generatorRequest struct {
	description string
	annotations map[string]string
	env         []string
	names       []string
	// granted is what XPU_VISIBLE_DEVICES becomes.
	granted string
	// narrow is true when jit mode must resolve the request from the
	// requested devices alone.
	narrow string
}

// libraryResult is what the CDI library makes of the request with the specs
// in specDir, XPU_VISIBLE_DEVICES set as the shim sets it.
func libraryResult(t *testing.T, specDir string, req generatorRequest) *oci.Spec {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(specDir), cdiapi.WithAutoRefresh(false))
	require.NoError(t, err)
	want := bundleSpec(true, req.annotations, req.env...)
	_, err = cache.InjectDevices(want, req.names...)
	require.NoError(t, err)
	var granted []int
	for _, f := range strings.Split(req.granted, ",") {
		i, err := strconv.Atoi(f)
		require.NoError(t, err)
		granted = append(granted, i)
	}
	setVisibleDevices(want.Process, granted)
	return want
}

// TestJITMatchesGenerator checks that the jit mode gives a container the
// same OCI spec as the CDI library applying the spec that `xpu-cdi
// generate` writes for the same host, and that the cdi and auto modes use
// that spec; for index-only requests, that jit mode got there by
// discovering the requested devices only. The generator stats real device
// nodes: root only.
func TestJITMatchesGenerator(t *testing.T) {
	testreq.Root(t, "the generator reads real device nodes (mknod)")
	tree := fakehosttest.Build(t, fakehost.P800x8())
	requests := []generatorRequest{
		{
			description: "every name form",
			annotations: map[string]string{"cdi.k8s.io/x": "baidu.com/xpu=5"},
			env:         []string{"XPU_VISIBLE_DEVICES=3,0000:01:00.0,all"},
			names:       []string{"baidu.com/xpu=5", "baidu.com/xpu=3", "baidu.com/xpu=0000:01:00.0", "baidu.com/xpu=all"},
			granted:     "0,1,2,3,4,5,6,7",
		},
		{
			description: "one index by annotation",
			annotations: map[string]string{"cdi.k8s.io/x": "baidu.com/xpu=2"},
			names:       []string{"baidu.com/xpu=2"},
			granted:     "2", narrow: "2",
		},
		{
			description: "one index by variable",
			env:         []string{"XPU_VISIBLE_DEVICES=0"},
			names:       []string{"baidu.com/xpu=0"},
			granted:     "0", narrow: "0",
		},
		{
			description: "several indices, annotated and by variable, out of order",
			annotations: map[string]string{"cdi.k8s.io/b": "baidu.com/xpu=6", "cdi.k8s.io/a": "baidu.com/xpu=7,baidu.com/xpu=1"},
			env:         []string{"XPU_VISIBLE_DEVICES=4, baidu.com/xpu=0"},
			names:       []string{"baidu.com/xpu=7", "baidu.com/xpu=1", "baidu.com/xpu=6", "baidu.com/xpu=4", "baidu.com/xpu=0"},
			granted:     "0,1,4,6,7", narrow: "7,1,6,4,0",
		},
		{
			description: "repeated index",
			annotations: map[string]string{"cdi.k8s.io/x": "baidu.com/xpu=3"},
			env:         []string{"XPU_VISIBLE_DEVICES=3,3"},
			names:       []string{"baidu.com/xpu=3", "baidu.com/xpu=3", "baidu.com/xpu=3"},
			granted:     "3", narrow: "3,3,3",
		},
		{
			description: "an index and a PCI address: the whole host",
			env:         []string{"XPU_VISIBLE_DEVICES=1,0000:83:00.0"},
			names:       []string{"baidu.com/xpu=1", "baidu.com/xpu=0000:83:00.0"},
			granted:     "1,6",
		},
	}

	checkJITMatchesGenerator(t, tree, requests)
}

// TestJITMatchesGeneratorXRE5 is TestJITMatchesGenerator on a P800 host
// with driver and XRE 5.x, whose devices have index names only (nothing
// maps a node to a PCI address) and whose driver files are in the XRE's
// so/ directory and the system library directory.
func TestJITMatchesGeneratorXRE5(t *testing.T) {
	testreq.Root(t, "the generator reads real device nodes (mknod)")
	tree := fakehosttest.Build(t, fakehost.P800XRE5())
	checkJITMatchesGenerator(t, tree, []generatorRequest{
		{
			description: "all and an index",
			env:         []string{"XPU_VISIBLE_DEVICES=all,3"},
			names:       []string{"baidu.com/xpu=all", "baidu.com/xpu=3"},
			granted:     "0,1,2,3,4,5,6,7",
		},
		{
			description: "one index by annotation",
			annotations: map[string]string{"cdi.k8s.io/x": "baidu.com/xpu=2"},
			names:       []string{"baidu.com/xpu=2"},
			granted:     "2", narrow: "2",
		},
		{
			description: "several indices by variable",
			env:         []string{"XPU_VISIBLE_DEVICES=7,0,5"},
			names:       []string{"baidu.com/xpu=7", "baidu.com/xpu=0", "baidu.com/xpu=5"},
			granted:     "0,5,7", narrow: "7,0,5",
		},
	})
}

// checkJITMatchesGenerator runs the requests against the tree in jit, cdi
// and auto mode under each generator configuration.
func checkJITMatchesGenerator(t *testing.T, tree *fakehost.Tree, requests []generatorRequest) {
	t.Helper()
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
			for _, req := range requests {
				want := libraryResult(t, specDir, req)
				for _, mode := range []config.Mode{config.ModeJIT, config.ModeCDI, config.ModeAuto} {
					c := jitConfig(tree.Root)
					c.Mode = mode
					c.SpecDirs = []string{specDir}
					if tc.config != nil {
						tc.config(c)
					}
					dir, _ := writeBundle(t, bundleSpec(true, req.annotations, req.env...))
					log := &logtest.Recorder{}
					res, err := ModifyBundle(dir, c, Settings{Log: log})
					require.NoError(t, err, "%s: %s", req.description, mode)
					wantMode := mode
					if mode == config.ModeAuto {
						wantMode = config.ModeCDI
					}
					require.Equal(t, wantMode, res.Mode)
					require.Equal(t, want, readBundle(t, dir), "%s: mode %s differs from the generator's spec applied by the CDI library", req.description, mode)
					if mode == config.ModeJIT {
						require.Equal(t, req.narrow != "", log.Has("jit mode: discovered XPUs "+req.narrow+" only"), "%s: narrow discovery: %v", req.description, log.Lines())
						require.False(t, log.Has("discovering the whole host"), "%s: %v", req.description, log.Lines())
					}
				}
			}
		})
	}
}

// TestJITIndexRequestsOnEveryShape asks each fake host shape for each of
// its indices alone (and a few beyond), for all its compute devices by
// index, and for each compute index together with each index that is not a
// compute device: jit mode gives what cdi mode gives with the generator's
// spec, and where a name is unknown the same error, every valid name in it,
// whether jit mode found it out from the narrow discovery or not. Root
// only, as the generator.
func TestJITIndexRequestsOnEveryShape(t *testing.T) {
	testreq.Root(t, "the generator reads real device nodes (mknod)")
	for _, shape := range []fakehost.Host{fakehost.P800x8(), fakehost.P800XRE5(), fakehost.R200SRIOV(), fakehost.K200(), fakehost.Degraded()} {
		t.Run(shape.Shape, func(t *testing.T) {
			tree := fakehosttest.Build(t, shape)
			specDir := t.TempDir()
			generateSpec(t, tree.Root, specDir)

			var compute, others []string
			for i := range len(tree.Devices) + 2 {
				if slices.ContainsFunc(tree.ComputeDevices(), func(d fakehost.TreeDevice) bool { return d.Index == i }) {
					compute = append(compute, strconv.Itoa(i))
				} else {
					others = append(others, strconv.Itoa(i))
				}
			}
			require.NotEmpty(t, compute)
			require.NotEmpty(t, others)
			asks := [][]string{compute}
			for _, i := range append(slices.Clone(compute), others...) {
				asks = append(asks, []string{i})
			}
			for _, i := range compute {
				for _, o := range others {
					asks = append(asks, []string{i, o}, []string{o, i})
				}
			}
			for _, ask := range asks {
				env := "XPU_VISIBLE_DEVICES=" + strings.Join(ask, ",")
				results := map[config.Mode]string{}
				for _, mode := range []config.Mode{config.ModeCDI, config.ModeJIT} {
					c := jitConfig(tree.Root)
					c.Mode = mode
					c.SpecDirs = []string{specDir}
					dir, _ := writeBundle(t, bundleSpec(true, nil, env))
					_, err := ModifyBundle(dir, c, Settings{})
					if err != nil {
						require.ErrorIs(t, err, errUnknownDevice, env)
						results[mode] = strings.Replace(err.Error(), "("+string(mode)+" mode)", "(MODE mode)", 1)
						continue
					}
					data, err := os.ReadFile(ConfigPath(dir))
					require.NoError(t, err)
					results[mode] = string(data)
				}
				require.Equal(t, results[config.ModeCDI], results[config.ModeJIT], "%s: jit mode differs from cdi mode", env)
			}
		})
	}
}

// TestAutoModeFallsBackToJIT: without a spec of the kind, auto discovers the host.
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
