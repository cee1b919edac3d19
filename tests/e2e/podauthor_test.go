package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// podAuthorEngine is a CRI engine whose default runtime is the shim (jit
// mode, for the test's vendor), as `xpu-cdi runtime configure
// --set-as-default` leaves it. specDir is true when the engine resolves
// CDI itself (its spec directory gets the test's spec).
type podAuthorEngine struct {
	name    string
	specDir bool
	start   func(t *testing.T, shim string) harness.CRI
}

var podAuthorEngines = []podAuthorEngine{
	{"crio", true, func(t *testing.T, shim string) harness.CRI {
		removeIfCreated(t, crioRuntimeRoot)
		return harness.NewCRIO(t, harness.WithCRIOConfigEdit(func(t testing.TB, c *harness.CRIO) {
			configureRuntime(t, "--runtime", "crio", "--drop-in-file", filepath.Join(c.ConfigDir, "99-xpu.conf"),
				"--runtime-path", shim, "--set-as-default")
		}))
	}},
	{"containerd16", false, func(t *testing.T, shim string) harness.CRI {
		return harness.NewContainerd16(t, harness.WithCRI(), harness.WithConfigEdit(func(t testing.TB, path string) {
			configureRuntime(t, "--runtime", "containerd", "--config", path,
				"--drop-in-file", filepath.Join(filepath.Dir(path), "conf.d", "99-xpu.toml"), "--runtime-path", shim, "--set-as-default")
		}))
	}},
	{"containerd2", true, func(t *testing.T, shim string) harness.CRI {
		return harness.NewContainerd(t, harness.WithConfigEdit(func(t testing.TB, path string) {
			configureRuntime(t, "--runtime", "containerd", "--config", path,
				"--drop-in-file", filepath.Join(filepath.Dir(path), "conf.d", "99-xpu.toml"), "--runtime-path", shim, "--set-as-default")
		}))
	}},
}

// TestPodAuthorCannotTakeXPUs: with the shim as the default runtime of
// CRI-O, containerd 1.6 and containerd 2.x (the drop-ins of `xpu-cdi
// runtime configure --set-as-default`), what a pod author writes never
// grants an XPU, and what the device plugin answers grants exactly its
// devices:
//   - a pod annotation cdi.k8s.io/x: VENDOR/xpu=all (CRI-O copies it into
//     every container's OCI spec; "Pod annotations on CRI-O") gives
//     nothing;
//   - the plugin's container annotation gives exactly its XPUs, once, next
//     to that pod annotation;
//   - an image with ENV XPU_VISIBLE_DEVICES=all, a pod env of the same and
//     CAP_SYS_ADMIN added ("CAP_SYS_ADMIN as privilege") beside the plugin's annotation for
//     XPU 0 give XPU 0 only;
//   - the volume-mounts answer (/dev/null at
//     /var/run/xpu-container-devices/ID) with the pod's
//     XPU_VISIBLE_DEVICES=all ("The pod's or image's
//     XPU_VISIBLE_DEVICES=all") gives exactly the mounted IDs.
//
// The quoted names are attacks of docs/security.md, "Attacks the tests
// reproduce".
//
// Each container's device nodes are compared with the host's major:minor,
// and the shim's log must have grown (it ran for the container). The shim
// has accept-envvar-when-unprivileged = true: it never applies to specs
// from a CRI.
func TestPodAuthorCannotTakeXPUs(t *testing.T) {
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	tree := FakeHost(t, fakehost.P800x8())
	for _, engine := range podAuthorEngines {
		t.Run(engine.name, func(t *testing.T) {
			vendor := harness.UniqueVendor(t)
			// accept-envvar-when-unprivileged = true, what docs/kubernetes.md
			// once told users to set: it must not apply to pods.
			shim, shimLog := shimRuntime(t, tree, fmt.Sprintf("vendor = %q\naccept-envvar-when-unprivileged = true\n", vendor))
			cri := engine.start(t, shim)
			if engine.specDir {
				cri.WriteSpec(t, GenerateSpec(t, tree, vendor), vendor)
			}
			harness.PrepareCRI(t, cri)
			rootfs := t.TempDir()
			harness.BuildBusyboxRootfs(t, rootfs)
			image := cri.ImportCRIImage(t, rootfs, "xpu-e2e-busybox", harness.WithImageCmd("sh"))
			hostile := cri.ImportCRIImage(t, rootfs, "xpu-e2e-hostile", harness.WithImageEnv("XPU_VISIBLE_DEVICES=all"))
			plugin := func(ids ...string) map[string]string {
				v := ""
				for i, id := range ids {
					if i > 0 {
						v += ","
					}
					v += vendor + "/xpu=" + id
				}
				return map[string]string{"cdi.k8s.io/xpu-device-plugin_xpu": v}
			}
			podAll := map[string]string{"cdi.k8s.io/x": vendor + "/xpu=all"}
			all := map[string]string{"XPU_VISIBLE_DEVICES": "all"}
			mounts := func(ids ...string) []harness.CRIMount {
				var out []harness.CRIMount
				for _, id := range ids {
					out = append(out, harness.CRIMount{ContainerPath: "/var/run/xpu-container-devices/" + id, HostPath: "/dev/null", ReadOnly: true})
				}
				return out
			}

			for i, tc := range []struct {
				description string
				ctr         harness.CRIContainer
				want        []int
			}{
				{description: "pod annotation: no XPU", ctr: harness.CRIContainer{Image: image, PodAnnotations: podAll}},
				{
					description: "container annotation: exactly its XPUs", want: []int{3, 6},
					ctr: harness.CRIContainer{Image: image, PodAnnotations: podAll, Annotations: plugin("3", "6")},
				},
				{
					description: "image and pod ask for all with CAP_SYS_ADMIN: XPU 0 only", want: []int{0},
					ctr: harness.CRIContainer{Image: hostile, Env: all, AddCapabilities: []string{"SYS_ADMIN"}, Annotations: plugin("0")},
				},
				{
					description: "volume-mounts with the pod's XPU_VISIBLE_DEVICES=all: the mounted IDs", want: []int{1, 4},
					ctr: harness.CRIContainer{Image: hostile, Env: all, Mounts: mounts("1", "4")},
				},
				{description: "the pod's XPU_VISIBLE_DEVICES=all alone: no XPU", ctr: harness.CRIContainer{Image: hostile, Env: all}},
			} {
				t.Run(tc.description, func(t *testing.T) {
					size := fileSize(t, shimLog)
					c := tc.ctr
					c.Name = fmt.Sprintf("xpu-pa-%d", i)
					c.Command = []string{"sh", "-c", listXPUs}
					out := harness.CRIRunToCompletion(t, cri, c)
					requireShimLogged(t, shimLog, size)
					nodes, _ := parseNodes(t, out)
					var wantNodes map[string]string
					if len(tc.want) > 0 {
						wantNodes, _ = expect(tree, tc.want...)
					}
					if len(wantNodes) == 0 {
						require.Empty(t, nodes, "a pod author took XPUs:\n%s", out)
						return
					}
					require.Equal(t, wantNodes, nodes, "exactly the granted nodes and /dev/xpuctrl, with the host's major:minor")
				})
			}
			log, err := os.ReadFile(shimLog)
			require.NoError(t, err)
			if engine.name == "crio" {
				require.Contains(t, string(log), "not granting from the annotations cdi.k8s.io/")
			}
		})
	}
}

// TestPodAuthorHostPathForgery (docs/security.md, "A hostPath symlink to
// /dev/null at /var/run/xpu-container-devices/all") on CRI-O, containerd
// 1.6 and 2.x with the shim as default runtime under its default
// configuration: a pod's hostPath mount of a symlink to /dev/null at
// /var/run/xpu-container-devices/all (the engine resolves the link, so the
// shim sees what the device plugin's volume-mounts answer looks like) does
// not start, and the shim says why; the plugin's own answer (/dev/null)
// is refused the same way, naming accept-device-plugin-mounts.
func TestPodAuthorHostPathForgery(t *testing.T) {
	harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
	tree := FakeHost(t, fakehost.P800x8())
	link := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Symlink("/dev/null", link))
	for _, engine := range podAuthorEngines {
		t.Run(engine.name, func(t *testing.T) {
			vendor := harness.UniqueVendor(t)
			shim, shimLog := shimRuntime(t, tree, fmt.Sprintf("vendor = %q\naccept-device-plugin-mounts = false\n", vendor))
			cri := engine.start(t, shim)
			if engine.specDir {
				cri.WriteSpec(t, GenerateSpec(t, tree, vendor), vendor)
			}
			harness.PrepareCRI(t, cri)
			rootfs := t.TempDir()
			harness.BuildBusyboxRootfs(t, rootfs)
			image := cri.ImportCRIImage(t, rootfs, "xpu-e2e-busybox", harness.WithImageCmd("sh"))
			for i, tc := range []struct {
				description, source, id string
			}{
				{"a hostPath symlink to /dev/null at .../all", link, "all"},
				{"the device plugin's answer", "/dev/null", "3"},
			} {
				t.Run(tc.description, func(t *testing.T) {
					r := harness.CRIRun(t, cri, harness.CRIContainer{
						Name: fmt.Sprintf("xpu-forge-%d", i), Image: image, Command: []string{"sh", "-c", listXPUs},
						Mounts: []harness.CRIMount{{ContainerPath: "/var/run/xpu-container-devices/" + tc.id, HostPath: tc.source, ReadOnly: true}},
					})
					require.False(t, r.Success(), "the container started:\n%s", r)
					log, err := os.ReadFile(shimLog)
					require.NoError(t, err)
					require.Contains(t, string(log), fmt.Sprintf("the container asks for XPUs through mounts at /var/run/xpu-container-devices/ (%s/xpu=%s)", vendor, tc.id))
					require.Contains(t, string(log), "set accept-device-plugin-mounts = true in ")
				})
			}
		})
	}
}
