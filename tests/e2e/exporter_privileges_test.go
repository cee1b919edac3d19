package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestHelmExporterAdminAccess installs the chart under DRA with the
// exporter's default there: no privilege, CAP_SYS_CHROOT only, and every
// XPU of the node through an admin-access ResourceClaimTemplate. It checks
// that an unlabelled namespace is refused at install, naming the label;
// that the fake xpu-smi (which opens /dev/xpuctrl and every /dev/xpuN, as
// the real one does) runs and a pod's claim is attributed to it while the
// exporter's own claim is not, and takes no XPU from the pod. It then
// measures what the exporter still needs (docs/exporter.md, "Privileges"):
// without CAP_SYS_CHROOT, and without the claim, xpu-smi fails, with the
// error each gives. On containerd 2.x.
func TestHelmExporterAdminAccess(t *testing.T) {
	harness.RequiresRoot(t)
	helm := helmBinary(t)
	c := harness.NewCluster(t, harness.WithClusterRuntime(clusterRuntimes[0].start), harness.WithNodeLabels("baidu.com/xpu.present=true"))
	busybox := c.BusyboxImage(t)
	ch := newDRAChart(t, c, helm)
	port := harness.FreePort(t)
	// The last --set wins over newDRAChart's port.
	ch.rel.values = append(ch.rel.values, "exporter.port="+strconv.Itoa(port))
	metrics := "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"

	// Admin access only where the namespace says so: refused at install.
	c.MustKubectl(t, "label", "namespace", "xpu-system", "resource.kubernetes.io/admin-access-")
	args := []string{"install", ch.rel.name, filepath.Join(moduleRoot(t), "deployments", "helm", "xpu-cdi"), "--namespace", "xpu-system", "--kubeconfig", c.Kubeconfig}
	for _, v := range ch.rel.values {
		args = append(args, "--set", v)
	}
	out, err := exec.Command(helm, args...).CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "kubectl label namespace xpu-system resource.kubernetes.io/admin-access=true")
	require.Empty(t, strings.TrimSpace(c.Kubectl(t, "get", "daemonsets", "--namespace", "xpu-system", "--output", "name").Stdout), "nothing installed")

	c.MustKubectl(t, "label", "namespace", "xpu-system", "resource.kubernetes.io/admin-access=true")
	ch.rel.install(t)
	d := ch.draCluster()
	d.waitSlice(t, func(devs []resourceapi.Device) bool { return len(devs) == 8 })
	ds := strings.TrimSpace(c.MustKubectl(t, "get", "daemonsets", "--namespace", "xpu-system", "--selector", "app.kubernetes.io/name=xpu-exporter", "--output", "name").Stdout)
	require.NotEmpty(t, ds)
	pods, err := c.Client.CoreV1().Pods("xpu-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=xpu-exporter"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	sc := pods.Items[0].Spec.Containers[0].SecurityContext
	require.Nil(t, sc.Privileged, "the exporter is not privileged")
	require.Len(t, pods.Items[0].Status.ResourceClaimStatuses, 1, "its claim")
	claim, err := c.Client.ResourceV1().ResourceClaims("xpu-system").Get(context.Background(), *pods.Items[0].Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, claim.Status.Allocation)
	require.Len(t, claim.Status.Allocation.Devices.Results, 8, "every XPU of the node")
	for _, r := range claim.Status.Allocation.Devices.Results {
		require.True(t, r.AdminAccess != nil && *r.AdminAccess, "%s: admin access", r.Device)
	}

	// A pod's claim for one XPU is still served and attributed.
	c.ApplyObjects(t, claimTemplate("one-xpu", 1, false))
	c.ApplyObjects(t, xpuPod("dra-one", busybox, "template:one-xpu"))
	c.WaitPodRunning(t, "default", "dra-one", podTimeout)
	got := d.allocated(t, "dra-one")
	require.Len(t, got, 1)
	var scrape string
	testutil.Eventually(t, func(t testing.TB) bool {
		var err error
		scrape, err = httpGet(metrics)
		return assert.NoError(t, err) && assert.Contains(t, scrape, `exported_pod="dra-one"`)
	}, podTimeout, 250*time.Millisecond, "the exporter's scrape")
	require.Contains(t, scrape, `xpu_exporter_source_up{source="xpu-smi"} 1`, "xpu-smi reached the XPUs")
	require.Contains(t, scrape, `xpu_exporter_source_up{source="pod-resources"} 1`)
	require.Contains(t, scrape, fmt.Sprintf(`exported_pod="dra-one",model="P800",pci_bus_id="%s",xpu="%d"}`, ch.tree.Devices[got[0]].BDF, got[0]))
	require.NotContains(t, scrape, `exported_namespace="xpu-system"`, "the exporter's own claim holds nothing")

	// What the exporter still needs: without each, xpu-smi fails.
	for _, tc := range []struct {
		name, patch, log string
	}{
		{
			"no CAP_SYS_CHROOT",
			`[{"op":"replace","path":"/spec/template/spec/containers/0/securityContext/capabilities/add","value":[]}]`,
			"operation not permitted",
		},
		{
			// As uid 65534 the kubelet's socket is not reachable (nor, with
			// no capability in effect, the chroot).
			"uid 65534",
			`[{"op":"replace","path":"/spec/template/spec/containers/0/securityContext/runAsUser","value":65534}]`,
			"permission denied",
		},
		{
			"no claim",
			`[{"op":"remove","path":"/spec/template/spec/resourceClaims"},{"op":"remove","path":"/spec/template/spec/containers/0/resources/claims"}]`,
			"open /dev/xpuctrl: Operation not permitted",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.MustKubectl(t, "patch", ds, "--namespace", "xpu-system", "--type", "json", "--patch", tc.patch)
			c.MustKubectl(t, "rollout", "status", ds, "--namespace", "xpu-system", "--timeout", "2m")
			testutil.Eventually(t, func(t testing.TB) bool {
				s, err := httpGet(metrics)
				return assert.NoError(t, err) && assert.Contains(t, s, `xpu_exporter_source_up{source="xpu-smi"} 0`)
			}, podTimeout, 250*time.Millisecond, "xpu-smi fails")
			var logs string
			testutil.Eventually(t, func(t testing.TB) bool {
				logs = c.Kubectl(t, "logs", ds, "--namespace", "xpu-system").Stdout
				return assert.Contains(t, logs, tc.log)
			}, podTimeout, 250*time.Millisecond)
			for _, l := range strings.Split(logs, "\n") {
				if strings.Contains(strings.ToLower(l), "not permitted") || strings.Contains(l, "permission denied") {
					t.Logf("%s: %s", tc.name, l)
				}
			}
			c.MustKubectl(t, "rollout", "undo", ds, "--namespace", "xpu-system")
			c.MustKubectl(t, "rollout", "status", ds, "--namespace", "xpu-system", "--timeout", "2m")
		})
	}
}
