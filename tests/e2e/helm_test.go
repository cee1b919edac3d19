package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// helmRelease is what a test installs: the chart with the test's values.
type helmRelease struct {
	c      *harness.Cluster
	helm   string
	name   string
	values []string
}

// helmBinary is the helm of make deps, else the one on PATH.
func helmBinary(t *testing.T) string {
	t.Helper()
	helm := filepath.Join(harness.ToolsBin(), "helm")
	if _, err := os.Stat(helm); err != nil {
		helm = harness.RequiresTool(t, "helm")
	}
	return helm
}

func (r *helmRelease) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(r.helm, append(args, "--kubeconfig", r.c.Kubeconfig)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "helm %v:\n%s", args, out)
	return string(out)
}

func (r *helmRelease) install(t *testing.T) {
	t.Helper()
	args := []string{
		"install", r.name, filepath.Join(moduleRoot(t), "deployments", "helm", "xpu-cdi"),
		"--namespace", "xpu-system", "--create-namespace", "--wait", "--timeout", "3m",
	}
	for _, v := range r.values {
		args = append(args, "--set", v)
	}
	r.run(t, args...)
	// A test that fails before its uninstall must not leave a device
	// plugin for the next one (a second release of the same resource).
	t.Cleanup(func() {
		_ = exec.Command(r.helm, "uninstall", r.name, "--namespace", "xpu-system", "--wait", "--ignore-not-found", "--kubeconfig", r.c.Kubeconfig).Run()
	})
	// Registered last, run first: the pods' logs before the uninstall.
	t.Cleanup(func() {
		if t.Failed() {
			res := r.c.Kubectl(t, "logs", "--namespace", "xpu-system", "--selector", "app.kubernetes.io/part-of=xpu-cdi", "--all-containers", "--prefix", "--tail", "40")
			t.Logf("the release's pods:\n%s", res.String())
		}
	})
}

// test runs helm test (the chart's validator pod) and returns its log:
// xpu-cdi check-container's lines.
func (r *helmRelease) test(t *testing.T) string {
	t.Helper()
	out := r.run(t, "test", r.name, "--namespace", "xpu-system", "--timeout", "3m", "--logs")
	require.Contains(t, out, "Phase:          Succeeded", out)
	return out
}

func (r *helmRelease) uninstall(t *testing.T) {
	t.Helper()
	r.run(t, "uninstall", r.name, "--namespace", "xpu-system", "--wait", "--timeout", "3m")
}

// nodeFiles lists the files below dirs with their type, mode and size, for
// "the node is as it was" checks. An uninstaller may remove a directory in
// the middle of the walk: in a retried condition, pass the try's t
// (testutil.Eventually), so that the error is "not yet".
func nodeFiles(t testing.TB, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, dir := range dirs {
		require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%s %s %d", p, info.Mode(), info.Size()))
			return nil
		}))
	}
	sort.Strings(out)
	return out
}

func waitAllocatable(t *testing.T, c *harness.Cluster, resourceName, want string) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), c.Node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		q := n.Status.Allocatable[corev1.ResourceName(resourceName)]
		return q.Cmp(resource.MustParse(want)) == 0
	}, podTimeout, 250*time.Millisecond, "the node does not advertise %s %s", want, resourceName)
}

// xpusOf returns the indices of the fake host's XPUs a pod's container sees,
// after checking it sees them exactly as the host has them.
func xpusOf(t *testing.T, c *harness.Cluster, tree *fakehost.Tree, pod string) []int {
	t.Helper()
	r := c.Exec(t, "default", pod, "main", "sh", "-c", listXPUs)
	require.True(t, r.Success(), r.String())
	nodes, env := parseNodes(t, r.Stdout)
	var idx []int
	for _, d := range tree.Devices {
		if _, ok := nodes[d.Path]; ok {
			idx = append(idx, d.Index)
		}
	}
	wantNodes, wantEnv := expect(tree, idx...)
	require.Equal(t, wantNodes, nodes, "%s: its XPUs with the host's major:minor and /dev/xpuctrl, nothing else", pod)
	require.Equal(t, wantEnv, env, pod)
	return idx
}

// installerPropagation is the installer.mountPropagation the Helm tests
// set: none (the chart's HostToContainer, which needs / shared, as systemd
// makes it on a node) on CRI-O, which the harness runs in a mount namespace
// whose / is shared; "" on containerd, which runs on this machine's private
// /. (CRI-O refuses the installer's host / on a private / even without
// propagation: it makes every hostPath holding its storage root
// HostToContainer.)
// exporterValues are the exporter values of the Helm tests: a free port
// (the pod runs in the node's network) and the test kubelet's PodResources
// directory. On CRI-O the exporter is off: its privileged pod failed with
// CreateContainerError on the test cluster's CRI-O and the cause is not
// known yet (on containerd it runs and is checked); ok says whether it runs.
func exporterValues(c *harness.Cluster, port int) (values []string, ok bool) {
	if c.Runtime.EngineName() == "crio" {
		return []string{"exporter.enabled=false"}, false
	}
	return []string{"exporter.port=" + strconv.Itoa(port), "exporter.podResourcesDir=" + filepath.Join(c.KubeletRootDir, "pod-resources")}, true
}

func installerPropagation(c *harness.Cluster) []string {
	if c.Runtime.EngineName() == "crio" {
		return nil
	}
	return []string{"installer.mountPropagation="}
}

// TestHelmChart installs deployments/helm/xpu-cdi into the private cluster
// on a node that has a Kunlun driver tree (a fake P800 host with real device
// nodes) and no xpu-cdi files: the installer puts the hook and the spec in
// place, the device plugin advertises the XPUs, the labels file appears in
// an NFD features directory, and a pod asking for one XPU runs with exactly
// it. helm uninstall then leaves the node's files as they were. A second
// release with time-slicing on a one-XPU host runs three pods on that XPU
// and keeps a fourth pending. What the test sets: the image (the static
// binaries imported into the runtime), the driver's place on the host, the
// spec file in the runtime's spec directory, a test CDI vendor, a features
// directory standing for NFD's, host networking (no CNI) and, on containerd,
// no mount propagation into the installer (installerPropagation). On
// containerd 2.x and CRI-O.
func TestHelmChart(t *testing.T) {
	harness.RequiresRoot(t)
	helm := helmBinary(t)
	for _, rt := range clusterRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			c := harness.NewCluster(t, harness.WithClusterRuntime(rt.start), harness.WithNodeLabels("baidu.com/xpu.present=true"))
			busybox := c.BusyboxImage(t)
			rootfs := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "bin"), 0o755))
			for _, name := range []string{"xpu-cdi", "xpu-runtime-hook", "xpu-container-runtime", "xpu-device-plugin", "xpu-exporter"} {
				data, err := os.ReadFile(Binary(t, name))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(rootfs, "usr", "bin", name), data, 0o755))
			}
			image := c.ImportImage(t, rootfs, "localhost/xpu-cdi:e2e", harness.WithImageCmd("/usr/bin/xpu-device-plugin"))
			require.Equal(t, "localhost/xpu-cdi:e2e", image)

			vendor := harness.UniqueVendor(t)
			base := t.TempDir() // stands for the host's /opt: the hook goes below it
			features := filepath.Join(t.TempDir(), "features.d")
			require.NoError(t, os.Mkdir(features, 0o755))
			specFile := filepath.Join(c.SpecDir(), vendor+"-xpu.yaml")
			hookDir := filepath.Join(base, "opt", "xpu-cdi", "bin")
			exporterPort := harness.FreePort(t)
			exporter, exporterRuns := exporterValues(c, exporterPort)
			// Clipped: each release appends its own values.
			common := slices.Clip(append(append(append(installerPropagation(c), exporter...),
				"image.repository=localhost/xpu-cdi", "image.tag=e2e", "image.pullPolicy=Never", "hostNetwork=true",
				"installer.hookDir="+hookDir, "cdi.specFile="+specFile, "installer.interval=1s",
				"cdi.vendor="+vendor, "devicePlugin.healthCheckInterval=1s", "labels.featuresDir="+features,
			), glibcTestImage(t, c)...))

			t.Run("one XPU", func(t *testing.T) {
				tree := FakeHost(t, fakehost.P800x8())
				before := nodeFiles(t, base, features, c.SpecDir(), tree.Root)
				rel := &helmRelease{c: c, helm: helm, name: "xpu", values: append(common,
					"host.devRoot="+tree.Root, "host.driverRoot="+tree.Root)}
				rel.install(t)
				waitAllocatable(t, c, "baidu.com/xpu", "8")

				// The spec names the host's paths and the installed hook, nothing of a package.
				data, err := os.ReadFile(specFile)
				require.NoError(t, err)
				spec, err := cdispec.Parse(data)
				require.NoError(t, err)
				require.Equal(t, filepath.Join(hookDir, "xpu-runtime-hook"), spec.ContainerEdits.Hooks[0].Path)
				require.Equal(t, tree.Path("/dev/xpuctrl"), spec.ContainerEdits.DeviceNodes[0].HostPath)
				require.NotContains(t, string(data), "/usr/bin/xpu-runtime-hook")
				require.NotContains(t, string(data), "hostPath: /host/", "no host path through the installer's /host")
				labels, err := os.ReadFile(filepath.Join(features, "xpu-cdi"))
				require.NoError(t, err)
				require.Contains(t, string(labels), "baidu.com/xpu.present=true\nbaidu.com/xpu.count=8\nbaidu.com/xpu.model=P800\n")

				// helm test: the validator got one XPU, /dev/xpuctrl and xpu-smi,
				// which ran in tests.image with what the spec gave it.
				logs := rel.test(t)
				require.Contains(t, logs, "ok   1 XPU device node(s) [/dev/xpu")
				require.Contains(t, logs, "ok   /dev/xpuctrl")
				require.Regexp(t, `ok   xpu-smi \S+ \(ran: `, logs)

				c.Apply(t, example(t, "device-plugin-pod.yaml", busybox))
				c.WaitPodRunning(t, "default", "xpu-one", podTimeout)
				idx := xpusOf(t, c, tree, "xpu-one")
				require.Len(t, idx, 1, "exactly one XPU")
				// The exporter's DaemonSet: the fake xpu-smi run in a chroot
				// into the host root, the pod's XPU attributed to it.
				var scrape string
				if exporterRuns && !assert.Eventually(t, func() bool {
					scrape, _ = httpGet("http://127.0.0.1:" + strconv.Itoa(exporterPort) + "/metrics")
					return strings.Contains(scrape, `exported_pod="xpu-one"`)
				}, podTimeout, 250*time.Millisecond) {
					t.Fatalf("the exporter's scrape:\n%s\n%s", scrape, c.Kubectl(t, "describe", "pod", "--namespace", "xpu-system", "-l", "app.kubernetes.io/name=xpu-exporter").String())
				}
				if exporterRuns {
					require.Contains(t, scrape, `xpu_exporter_source_up{source="xpu-smi"} 1`)
					require.Contains(t, scrape, fmt.Sprintf(`xpu_memory_total_bytes{exported_container="main",exported_namespace="default",exported_pod="xpu-one",model="P800",pci_bus_id="%s",xpu="%d"}`, tree.Devices[idx[0]].BDF, idx[0]))
				}
				c.MustKubectl(t, "delete", "pod", "xpu-one", "--namespace", "default", "--wait")

				rel.uninstall(t)
				testutil.Eventually(t, func(t testing.TB) bool {
					return assert.Equal(t, before, nodeFiles(t, base, features, c.SpecDir(), tree.Root))
				}, podTimeout, 250*time.Millisecond, "helm uninstall leaves the node as it was")
			})

			t.Run("time-slicing", func(t *testing.T) {
				h := fakehost.P800x8()
				h.Devices = h.Devices[:1]
				tree := FakeHost(t, h)
				before := nodeFiles(t, base, features, c.SpecDir(), tree.Root)
				rel := &helmRelease{c: c, helm: helm, name: "xpu-shared", values: append(common,
					"host.devRoot="+tree.Root, "host.driverRoot="+tree.Root,
					"devicePlugin.config.version=v1",
					"devicePlugin.config.sharing.timeSlicing.resources[0].name=baidu.com/xpu",
					"devicePlugin.config.sharing.timeSlicing.resources[0].replicas=3")}
				rel.install(t)
				waitAllocatable(t, c, "baidu.com/xpu", "3")
				labels, err := os.ReadFile(filepath.Join(features, "xpu-cdi"))
				require.NoError(t, err)
				require.Contains(t, string(labels), "baidu.com/xpu.count=1\n")
				require.Contains(t, string(labels), "baidu.com/xpu.sharing-strategy=time-slicing\nbaidu.com/xpu.replicas=3\n")

				tasks := []string{"task-a", "task-b", "task-c"}
				c.Apply(t, example(t, "time-sliced-share.yaml", busybox))
				for _, name := range tasks {
					c.WaitPodRunning(t, "default", name, podTimeout)
					require.Equal(t, []int{0}, xpusOf(t, c, tree, name), "%s shares XPU 0", name)
				}
				c.ApplyObjects(t, limitsPod("shared-3", busybox, "baidu.com/xpu"))
				pod := c.WaitPod(t, "default", "shared-3", podTimeout, func(p *corev1.Pod) bool {
					for _, cond := range p.Status.Conditions {
						if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, "Insufficient baidu.com/xpu") {
							return true
						}
					}
					return false
				})
				require.Equal(t, corev1.PodPending, pod.Status.Phase, "three replicas, three pods")
				for _, name := range append(tasks, "shared-3") {
					c.MustKubectl(t, "delete", "pod", name, "--namespace", "default", "--wait")
				}

				rel.uninstall(t)
				testutil.Eventually(t, func(t testing.TB) bool {
					return assert.Equal(t, before, nodeFiles(t, base, features, c.SpecDir(), tree.Root))
				}, podTimeout, 250*time.Millisecond, "helm uninstall leaves the node as it was")
			})
		})
	}
}
