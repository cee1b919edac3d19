package cdispec_test

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

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
		name     string
		host     fakehost.Host
		settings cdispec.Settings
	}{
		{name: "p800x8", host: fakehost.P800x8(), settings: cdispec.Settings{NoHooks: true}},
		{name: "p800x8-hooks", host: fakehost.P800x8(), settings: cdispec.Settings{HookPath: "/usr/bin/xpu-runtime-hook", NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex}}},
		{name: "p800x8-nodes-only-index", host: fakehost.P800x8(), settings: cdispec.Settings{NodesOnly: true, NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex}}},
		{name: "r200-sriov", host: fakehost.R200SRIOV(), settings: cdispec.Settings{NoHooks: true}},
		{name: "k200", host: fakehost.K200(), settings: cdispec.Settings{NoHooks: true}},
		{name: "degraded", host: fakehost.Degraded(), settings: cdispec.Settings{NoHooks: true}},
		{name: "p800-xre5", host: fakehost.P800XRE5(), settings: cdispec.Settings{NoHooks: true}},
		{name: "p800-xre5-hooks", host: fakehost.P800XRE5(), settings: cdispec.Settings{HookPath: "/usr/bin/xpu-runtime-hook", NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex}}},
		{name: "p800-sysfs", host: fakehost.P800Sysfs(), settings: cdispec.Settings{NoHooks: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, host := discoverShape(t, tc.host)
			spec, _, err := cdispec.New(host, tc.settings)
			require.NoError(t, err)
			require.NoError(t, cdispec.ValidateSpec(spec))
			data, err := cdispec.Encode(spec, cdispec.FormatYAML)
			require.NoError(t, err)
			requireRoundTrip(t, spec, data)
			got := bytes.ReplaceAll(data, []byte(tree.Root), []byte(goldenRoot))
			testutil.Golden(t, tc.name+".yaml", got)
		})
	}
}

func TestPodman431CanReadTheDefaultSpec(t *testing.T) {
	_, host := discoverShape(t, fakehost.P800x8())
	spec, _, err := cdispec.New(host, cdispec.Settings{})
	require.NoError(t, err)
	require.Equal(t, "0.5.0", spec.Version, "Podman 4.3.1 reads at most cdiVersion 0.5.0")
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		description string
		host        fakehost.Host
		settings    cdispec.Settings
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
			settings:    cdispec.Settings{NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex}, NoAllDevice: true},
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
			spec, warnings, err := cdispec.New(host, tc.settings)
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
	spec, _, err := cdispec.New(host, cdispec.Settings{Vendor: "test.xpu-cdi.dev", Class: "xpu", NoHooks: true})
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

// TestHooks: one setup-libraries hook by default, at HookPath, with an
// explicit environment; none with NoHooks, nor with NodesOnly (no libraries
// to set up).
func TestHooks(t *testing.T) {
	_, host := discoverShape(t, fakehost.P800x8())
	for _, tc := range []struct {
		description string
		settings    cdispec.Settings
		wantPath    string
	}{
		{description: "default", wantPath: cdispec.DefaultHookPath},
		{description: "hook path", settings: cdispec.Settings{HookPath: "/opt/xpu/bin/xpu-runtime-hook"}, wantPath: "/opt/xpu/bin/xpu-runtime-hook"},
		{description: "no hooks", settings: cdispec.Settings{NoHooks: true}},
		{description: "nodes only", settings: cdispec.Settings{NodesOnly: true, HookPath: "/opt/hook"}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			spec, _, err := cdispec.New(host, tc.settings)
			require.NoError(t, err)
			if tc.wantPath == "" {
				require.Empty(t, spec.ContainerEdits.Hooks)
				return
			}
			require.Len(t, spec.ContainerEdits.Hooks, 1)
			h := spec.ContainerEdits.Hooks[0]
			require.Equal(t, "createContainer", h.HookName)
			require.Equal(t, tc.wantPath, h.Path)
			require.Equal(t, []string{"xpu-runtime-hook", "setup-libraries"}, h.Args[:2])
			require.Equal(t, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, h.Env, "never the runtime's environment")
		})
	}
}

func TestInvalidKind(t *testing.T) {
	_, host := discoverShape(t, fakehost.P800x8())
	_, _, err := cdispec.New(host, cdispec.Settings{Vendor: "baidu.com", Class: "x/y"})
	require.ErrorContains(t, err, `class "x/y"`)
	_, _, err = cdispec.New(host, cdispec.Settings{Vendor: "-bad"})
	require.ErrorContains(t, err, `vendor "-bad"`)
}

// TestVFNames: every VF of an SR-IOV host is a CDI device by its index and
// by its PCI address, with its own node and no other; its PF, whose VFs are
// enabled, is offered under neither name.
func TestVFNames(t *testing.T) {
	for _, h := range []fakehost.Host{fakehost.P800SRIOV(), fakehost.R200SRIOV()} {
		t.Run(h.Shape, func(t *testing.T) {
			_, host := discoverShape(t, h)
			spec, _, err := cdispec.New(host, cdispec.Settings{NoHooks: true})
			require.NoError(t, err)
			byName := map[string][]string{}
			for _, d := range spec.Devices {
				for _, n := range d.ContainerEdits.DeviceNodes {
					byName[d.Name] = append(byName[d.Name], n.Path)
				}
			}
			vfs := 0
			for _, d := range host.Devices {
				require.NotNil(t, d.PCI, d.Node.Path)
				switch {
				case d.PCI.Function == discover.FunctionVF:
					vfs++
					for _, name := range []string{strconv.Itoa(d.Index), d.PCI.Address} {
						require.Containsf(t, byName, name, "VF %s has no device %q", d.Node.Path, name)
						require.Equalf(t, []string{d.Node.Path}, byName[name], "device %q", name)
					}
				case d.PCI.NumVFs > 0:
					require.NotContains(t, byName, strconv.Itoa(d.Index), "PF with VFs enabled")
					require.NotContains(t, byName, d.PCI.Address, "PF with VFs enabled")
				}
			}
			require.Positive(t, vfs, "the shape has VFs")
		})
	}
}
