package cdispec_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenRoot replaces the temporary root of a fake host in golden files.
const goldenRoot = "/HOST"

func discoverShape(t *testing.T, h fakehost.Host) (*fakehost.Tree, *discover.Host) {
	t.Helper()
	// Plain files for nodes: golden files must not depend on running as root.
	tree := fakehosttest.Build(t, h, fakehost.WithoutMknod())
	host, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	return tree, host
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		host fakehost.Host
		opts []cdispec.Option
	}{
		{name: "p800x8", host: fakehost.P800x8()},
		{name: "p800x8-hooks", host: fakehost.P800x8(), opts: []cdispec.Option{cdispec.WithRuntimeHooks("/usr/bin/xpu-runtime-hook"), cdispec.WithNameStrategies(cdispec.NameByIndex)}},
		{name: "p800x8-nodes-only-index", host: fakehost.P800x8(), opts: []cdispec.Option{cdispec.WithDriverFiles(false), cdispec.WithNameStrategies(cdispec.NameByIndex)}},
		{name: "r200-sriov", host: fakehost.R200SRIOV()},
		{name: "k200", host: fakehost.K200()},
		{name: "degraded", host: fakehost.Degraded()},
		{name: "p800-xre5", host: fakehost.P800XRE5()},
		{name: "p800-xre5-hooks", host: fakehost.P800XRE5(), opts: []cdispec.Option{cdispec.WithRuntimeHooks("/usr/bin/xpu-runtime-hook"), cdispec.WithNameStrategies(cdispec.NameByIndex)}},
		{name: "p800-sysfs", host: fakehost.P800Sysfs()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, host := discoverShape(t, tc.host)
			spec, _, err := cdispec.New(host, tc.opts...)
			require.NoError(t, err)
			require.NoError(t, cdispec.ValidateSpec(spec))
			data, err := cdispec.Encode(spec, cdispec.FormatYAML)
			require.NoError(t, err)
			requireRoundTrip(t, spec, data)
			got := bytes.ReplaceAll(data, []byte(tree.Root), []byte(goldenRoot))
			golden := filepath.Join("testdata", tc.name+".yaml")
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./pkg/cdi -update to create it")
			require.Equal(t, string(want), string(got))
		})
	}
}

func TestPodman431CanReadTheDefaultSpec(t *testing.T) {
	_, host := discoverShape(t, fakehost.P800x8())
	spec, _, err := cdispec.New(host)
	require.NoError(t, err)
	require.Equal(t, "0.5.0", spec.Version, "Podman 4.3.1 reads at most cdiVersion 0.5.0")
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		description string
		host        fakehost.Host
		opts        []cdispec.Option
		want        []string
		absent      []string
		warning     string
	}{
		{
			description: "every strategy",
			host:        fakehost.P800x8(),
			want:        []string{"0", "7", "0000:01:00.0", "0000:84:00.0", "02P00A5240V00101", "all"},
		},
		{
			description: "index only, no all",
			host:        fakehost.P800x8(),
			opts:        []cdispec.Option{cdispec.WithNameStrategies(cdispec.NameByIndex), cdispec.WithAllDevice(false)},
			want:        []string{"0", "7"},
			absent:      []string{"0000:01:00.0", "all", "02P00A5240V00101"},
		},
		{
			description: "K200 domains share a PCI function: no PCI-address names",
			host:        fakehost.K200(),
			want:        []string{"0", "1", "all"},
			absent:      []string{"0000:3b:00.0"},
			warning:     "is shared by 2 devices",
		},
		{
			description: "a PF with VFs enabled is offered under no name",
			host:        fakehost.R200SRIOV(),
			want:        []string{"1", "2", "3", "4"},
			absent:      []string{"0"},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, host := discoverShape(t, tc.host)
			spec, warnings, err := cdispec.New(host, tc.opts...)
			require.NoError(t, err)
			names := map[string]bool{}
			for _, d := range spec.Devices {
				names[d.Name] = true
			}
			for _, n := range tc.want {
				require.Truef(t, names[n], "device %q missing; have %v", n, names)
			}
			for _, n := range tc.absent {
				require.Falsef(t, names[n], "device %q must not be there", n)
			}
			if tc.warning != "" {
				require.Contains(t, strings.Join(warnings, "\n"), tc.warning)
			}
		})
	}
}

// TestMultiDeviceRequests injects device combinations with the CDI library,
// as runtimes do, and checks that the container is told about exactly the
// devices it got, whatever the order.
func TestMultiDeviceRequests(t *testing.T) {
	tree, host := discoverShape(t, fakehost.P800x8())
	spec, _, err := cdispec.New(host, cdispec.WithKind("test.xpu-cdi.dev", "xpu"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, cdispec.WriteFile(filepath.Join(dir, "test.yaml"), spec, cdispec.FormatYAML))
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	require.NoError(t, err)

	for _, tc := range []struct {
		request []string
		want    []int
	}{
		{request: []string{"0", "3"}, want: []int{0, 3}},
		{request: []string{"3", "0"}, want: []int{0, 3}},
		{request: []string{"0000:04:00.0", "1"}, want: []int{1, 3}},
		{request: []string{"all", "2"}, want: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{request: []string{"5"}, want: []int{5}},
	} {
		t.Run(strings.Join(tc.request, "+"), func(t *testing.T) {
			var qualified []string
			for _, r := range tc.request {
				qualified = append(qualified, "test.xpu-cdi.dev/xpu="+r)
			}
			s := &oci.Spec{Process: &oci.Process{Env: []string{"PATH=/bin"}}, Linux: &oci.Linux{}}
			unresolved, err := cache.InjectDevices(s, qualified...)
			require.NoError(t, err, "unresolved: %v", unresolved)

			var nodes []string
			for _, d := range s.Linux.Devices {
				nodes = append(nodes, d.Path)
			}
			var env []string
			for _, e := range s.Process.Env {
				if strings.HasPrefix(e, "XPU") {
					env = append(env, e)
				}
			}
			var wantNodes, wantEnv []string
			for _, i := range tc.want {
				td := tree.Devices[i]
				wantNodes = append(wantNodes, td.Path)
				wantEnv = append(wantEnv, cdispec.DeviceEnvPrefix+td.Path[len("/dev/xpu"):]+"="+td.BDF)
			}
			wantNodes = append(wantNodes, "/dev/xpuctrl")
			require.ElementsMatch(t, wantNodes, nodes)
			require.ElementsMatch(t, wantEnv, env, "one variable per granted device, none lost, none extra")
		})
	}
}

func TestHooksAlwaysHaveEnv(t *testing.T) {
	_, host := discoverShape(t, fakehost.P800x8())
	spec, _, err := cdispec.New(host, cdispec.WithHooks(cdispec.Hook{Stage: "createContainer", Path: "/usr/bin/xpu-runtime-hook", Args: []string{"xpu-runtime-hook", "x"}}))
	require.NoError(t, err)
	require.Len(t, spec.ContainerEdits.Hooks, 1)
	require.NotEmpty(t, spec.ContainerEdits.Hooks[0].Env)

	_, _, err = cdispec.New(host, cdispec.WithHooks(cdispec.Hook{Path: "/x"}))
	require.ErrorContains(t, err, "stage and path are required")
}

func TestInvalidKind(t *testing.T) {
	_, host := discoverShape(t, fakehost.P800x8())
	_, _, err := cdispec.New(host, cdispec.WithKind("baidu.com", "x/y"))
	require.ErrorContains(t, err, `class "x/y"`)
	_, _, err = cdispec.New(host, cdispec.WithKind("-bad", "xpu"))
	require.ErrorContains(t, err, `vendor "-bad"`)
}
