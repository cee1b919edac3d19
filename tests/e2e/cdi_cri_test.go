package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// criEngine starts one engine that serves the CRI; every CRI test runs its
// table against each of them.
type criEngine struct {
	name  string
	start func(t *testing.T) harness.CRI
}

var criEngines = []criEngine{
	{"containerd2", func(t *testing.T) harness.CRI { return harness.NewContainerd(t) }},
	{"crio", func(t *testing.T) harness.CRI { return harness.NewCRIO(t) }},
}

// listXPUsAndLoad is listXPUs, then every entry of /dev ("dev-entry
// /dev/null"), then the glibc program linked against libxpurt.so.1: it runs
// only when the hook made the library loadable.
const listXPUsAndLoad = listXPUs + `; for f in /dev/*; do echo "dev-entry $f"; done; xpu-test`

// devEntries returns the dev-entry lines of listXPUsAndLoad output.
func devEntries(out string) map[string]bool {
	entries := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if e, ok := strings.CutPrefix(line, "dev-entry "); ok {
			entries[e] = true
		}
	}
	return entries
}

// TestCRICDI asks each CRI engine for XPUs of a fake 8-device P800 host
// through the CRI: the CDI_devices field of the container config and
// cdi.k8s.io/ annotations, resolved by the engine from the spec xpu-cdi
// wrote into the engine's CDI directory. The container gets exactly the
// requested nodes with the host's major:minor and /dev/xpuctrl (its /dev is
// that of a container without devices plus those nodes), one
// XPU_CDI_DEVICE_<n> per device, and the driver library loads (the hook
// ran); an unknown device fails the create with an error naming it.
func TestCRICDI(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	rootfs := glibcRootfs(t)
	vendor := harness.UniqueVendor(t)
	spec := GenerateSpec(t, tree, vendor)
	kind := vendor + "/xpu"

	type request struct {
		field       []string          // CDI_devices
		annotations map[string]string // cdi.k8s.io/ annotations
	}
	cases := []struct {
		description string
		request     request
		want        []int
	}{
		{"CDI_devices: one device", request{field: []string{kind + "=0"}}, []int{0}},
		{"CDI_devices: 0 and 3", request{field: []string{kind + "=0", kind + "=3"}}, []int{0, 3}},
		{"CDI_devices: by PCI address", request{field: []string{kind + "=" + tree.Devices[5].BDF}}, []int{5}},
		{"CDI_devices: all", request{field: []string{kind + "=all"}}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"annotation: one device", request{annotations: map[string]string{"cdi.k8s.io/xpu-e2e": kind + "=2"}}, []int{2}},
		{"annotation: two devices in one value", request{annotations: map[string]string{"cdi.k8s.io/xpu-e2e": kind + "=1," + kind + "=6"}}, []int{1, 6}},
		{"annotation: by serial", request{annotations: map[string]string{"cdi.k8s.io/xpu-e2e": kind + "=" + tree.Devices[7].Serial}}, []int{7}},
	}

	for _, engine := range criEngines {
		t.Run(engine.name, func(t *testing.T) {
			cri := engine.start(t)
			harness.PrepareCRI(t, cri)
			image := cri.ImportCRIImage(t, rootfs, "xpu-e2e-glibc")
			cri.WriteSpec(t, spec, vendor)
			// What /dev holds without any device asked for.
			baseline := devEntries(harness.CRIRunToCompletion(t, cri, harness.CRIContainer{
				Name: "xpu-cdi-none", Image: image, Command: []string{"sh", "-c", listXPUs + `; for f in /dev/*; do echo "dev-entry $f"; done`},
			}))
			require.NotEmpty(t, baseline)

			for i, tc := range cases {
				t.Run(tc.description, func(t *testing.T) {
					out := harness.CRIRunToCompletion(t, cri, harness.CRIContainer{
						Name:        fmt.Sprintf("xpu-cdi-%d", i),
						Image:       image,
						Command:     []string{"sh", "-c", listXPUsAndLoad},
						CDIDevices:  tc.request.field,
						Annotations: tc.request.annotations,
					})
					nodes, env := parseNodes(t, out)
					wantNodes, wantEnv := expect(tree, tc.want...)
					require.Equal(t, wantNodes, nodes, "exactly the requested nodes and /dev/xpuctrl, with the host's major:minor")
					require.Equal(t, wantEnv, env, "one XPU_CDI_DEVICE_<N> per granted device and nothing else")
					require.Contains(t, out, fmt.Sprintf("xpu devices: %d\n", len(tc.want)),
						"xpu-test must load libxpurt.so.1 (the hook ran) and count the granted devices")
					wantDev := maps.Clone(baseline)
					for node := range wantNodes {
						wantDev[node] = true
					}
					require.Equal(t, wantDev, devEntries(out), "/dev must hold what it holds without devices, plus the XPU nodes and nothing else")
				})
			}

			t.Run("unknown device is refused", func(t *testing.T) {
				for i, req := range []request{
					{field: []string{kind + "=9"}},
					{annotations: map[string]string{"cdi.k8s.io/xpu-e2e": kind + "=9"}},
				} {
					r := harness.CRIRun(t, cri, harness.CRIContainer{
						Name: fmt.Sprintf("xpu-unknown-%d", i), Image: image, Command: []string{"true"},
						CDIDevices: req.field, Annotations: req.annotations,
					})
					require.NotZero(t, r.ExitCode, "an unknown device must fail the create: %s", r)
					require.Contains(t, r.Stderr, kind+"=9", "the error must name the device")
					t.Logf("refused: %s", lastLine(r.Stderr))
				}
			})
		})
	}
}

// TestCRICDIBadInput: a spec the engine cannot parse and a spec whose hook
// binary is missing. The request fails with an error naming the device or
// the hook, valid specs next to the broken one keep working, and the
// engine's CDI directory is left as it was.
func TestCRICDIBadInput(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	rootfs := glibcRootfs(t)
	good, broken, noHook := harness.UniqueVendor(t), harness.UniqueVendor(t), harness.UniqueVendor(t)
	goodSpec := GenerateSpec(t, tree, good)
	// Valid YAML up to a device entry that is not a mapping.
	brokenSpec := []byte(fmt.Sprintf("cdiVersion: \"0.5.0\"\nkind: %s/xpu\ndevices:\n  - name: \"0\"\n    containerEdits: [not, a, mapping\n", broken))
	missingHook := filepath.Join(t.TempDir(), "no-such-dir", "xpu-runtime-hook")
	noHookSpec := []byte(strings.ReplaceAll(string(GenerateSpec(t, tree, noHook)), Binary(t, "xpu-runtime-hook"), missingHook))
	require.Contains(t, string(noHookSpec), missingHook)

	for _, engine := range criEngines {
		t.Run(engine.name, func(t *testing.T) {
			cri := engine.start(t)
			harness.PrepareCRI(t, cri)
			image := cri.ImportCRIImage(t, rootfs, "xpu-e2e-glibc")
			cri.WriteSpec(t, goodSpec, good)
			brokenPath := cri.WriteSpec(t, brokenSpec, broken)
			cri.WriteSpec(t, noHookSpec, noHook)
			before := snapshot(t, cri.SpecDir())

			t.Run("unparsable spec", func(t *testing.T) {
				r := harness.CRIRun(t, cri, harness.CRIContainer{
					Name: "xpu-broken", Image: image, Command: []string{"true"}, CDIDevices: []string{broken + "/xpu=0"},
				})
				require.NotZero(t, r.ExitCode, r.String())
				require.Contains(t, r.Stderr, broken+"/xpu=0", "the error must name the device")
				t.Logf("refused: %s", lastLine(r.Stderr))
				require.Contains(t, cri.Log(), filepath.Base(brokenPath), "the engine's log must name the broken spec file")
			})

			t.Run("valid spec next to the broken one", func(t *testing.T) {
				out := harness.CRIRunToCompletion(t, cri, harness.CRIContainer{
					Name: "xpu-good", Image: image, Command: []string{"sh", "-c", listXPUsAndLoad}, CDIDevices: []string{good + "/xpu=4"},
				})
				nodes, _ := parseNodes(t, out)
				wantNodes, _ := expect(tree, 4)
				require.Equal(t, wantNodes, nodes)
			})

			t.Run("missing hook binary", func(t *testing.T) {
				r := harness.CRIRun(t, cri, harness.CRIContainer{
					Name: "xpu-nohook", Image: image, Command: []string{"true"}, CDIDevices: []string{noHook + "/xpu=0"},
				})
				require.NotZero(t, r.ExitCode, "a container whose hook is missing must not start: %s", r)
				require.Contains(t, r.Stderr, missingHook, "the error must name the missing hook")
				t.Logf("refused: %s", lastLine(r.Stderr))
			})

			require.Equal(t, before, snapshot(t, cri.SpecDir()), "the CDI directory changed")
			_, err := os.Stat(filepath.Dir(missingHook))
			require.ErrorIs(t, err, os.ErrNotExist, "nothing may create the missing hook's directory")
		})
	}
}

// lastLine is the last non-empty line of s (crictl's final error).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
