//go:build clustershell

package e2e

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestClusterShell starts the cluster and keeps it up until Ctrl-C, for
// trying things by hand (tests/e2e/README.md). It is no test: the build tag
// keeps it out of every run but the one asking for it. XPU_E2E_CLUSTER_SHELL
// =crio runs it on CRI-O, anything else on containerd 2.x.
func TestClusterShell(t *testing.T) {
	mode := os.Getenv("XPU_E2E_CLUSTER_SHELL")
	start := clusterRuntimes[0].start
	if mode == "crio" {
		start = clusterRuntimes[1].start
	}
	c := harness.NewCluster(t, harness.WithClusterRuntime(start))
	image := c.BusyboxImage(t)
	// Never stopped: a second Ctrl-C (or the one `go test` or timeout(1)
	// forwards) must not kill the process while the cleanups remove the
	// cluster.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	fmt.Printf(`
cluster up (%s on %s); in another shell:

  export KUBECONFIG=%s PATH=%s:$PATH
  kubectl get nodes
  kubectl run demo --image %s --image-pull-policy Never --overrides '{"spec":{"hostNetwork":true}}' -- sleep 3600

runtime endpoint: %s   CDI spec dir: %s   kubelet root: %s
logs: %s/*.log
Ctrl-C stops and removes everything.
`, harness.KubernetesVersion, c.Runtime.EngineName(), c.Kubeconfig, harness.ToolsBin(), image,
		c.Runtime.Endpoint(), c.SpecDir(), c.KubeletRootDir, c.Dir)
	<-sig
	fmt.Println("stopping the cluster")
}
