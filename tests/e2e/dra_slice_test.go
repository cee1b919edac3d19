package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestDRASliceAccepted runs xpu-dra-driver against the test cluster's real
// API server (v1.37.2) on a host whose facts the API server refused before
// (docs/security.md, "Host facts that make the API server refuse the
// slice"): 70 XPUs, all tainted (no CDI spec), a driver
// version longer than 64 bytes, and an mminfo whose size overflows. The
// node's pool is published as two slices the API server took, without the
// facts it would refuse, and the driver says what it left out.
func TestDRASliceAccepted(t *testing.T) {
	h := fakehost.Scaled(70, 4)
	h.DriverVersion = "5.0.21" + strings.Repeat(".1234", 13)
	h.Devices[3].MemoryMiB = 1 << 43
	tree := FakeHost(t, h)
	c := harness.NewCluster(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data, reg := t.TempDir(), t.TempDir()
	require.NoError(t, os.Chmod(data, 0o755))
	cmd := exec.CommandContext(ctx, Binary(t, "xpu-dra-driver"),
		"--kubeconfig", c.Kubeconfig, "--node-name", c.Node,
		"--dev-root", tree.Root, "--driver-root", tree.Root,
		"--cdi-spec-dir", t.TempDir(), "--health-address", "127.0.0.1:0",
		"--plugin-data-dir", data, "--plugin-registry-dir", reg)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()

	var got []resourceapi.ResourceSlice
	held := func() bool {
		l, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.Node})
		if err != nil {
			return false
		}
		n := 0
		for _, s := range l.Items {
			n += len(s.Spec.Devices)
		}
		got = l.Items
		return n == 70
	}
	for deadline := time.Now().Add(2 * time.Minute); !held(); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the API server never held the 70 XPUs; driver log:\n%s", logs.String())
		}
	}
	require.Len(t, got, 2, "64 tainted devices per slice")
	for _, s := range got {
		require.Equal(t, int64(2), s.Spec.Pool.ResourceSliceCount)
		for _, d := range s.Spec.Devices {
			require.NotContains(t, d.Attributes, resourceapi.QualifiedName("driverVersion"))
			require.Len(t, d.Taints, 1)
			if d.Name == "xpu-3" {
				require.Empty(t, d.Capacity, "no negative memory")
			}
		}
	}
	// The health endpoint: alive, and not ready, saying why (no kubelet
	// reads this registry directory).
	m := regexp.MustCompile(`health endpoint on (127\.0\.0\.1:\d+)`).FindStringSubmatch(logs.String())
	require.NotNil(t, m, logs.String())
	for path, want := range map[string]string{"/healthz": "200 ok\n", "/readyz": "503 not ready: not registered with the kubelet yet\n"} {
		resp, err := http.Get("http://" + m[1] + path) //nolint:noctx // loopback, bounded by the client's default transport
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, want, fmt.Sprintf("%d %s", resp.StatusCode, body), path)
	}
	require.Contains(t, logs.String(), "attribute driverVersion left out: the version value is 71 bytes long")
	require.Contains(t, logs.String(), "device xpu-3: capacity memory left out")
	require.NotContains(t, logs.String(), "did not take the ResourceSlice")
}
