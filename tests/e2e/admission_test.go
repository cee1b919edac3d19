package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// The names of deployments/xpu-dra-driver.yaml.
const (
	draNamespace = "kube-system"
	draAccount   = "xpu-dra-driver"
	draPolicy    = "xpu-dra-driver-resourceslices"
	draDriver    = "xpu.baidu.com"
)

// TestDRAAdmissionPolicy applies the RBAC and the ValidatingAdmissionPolicy
// of deployments/xpu-dra-driver.yaml to the test cluster's real API server
// and writes ResourceSlices with the tokens of two driver pods bound to two
// nodes (node-a and node-b: Node objects without a kubelet, the pods bound
// to them by spec.nodeName; a TokenRequest bound to such a pod names its
// node in the token). Node A's token writes its own slice (create, update,
// delete) and is refused, by the policy, for everything that would let it
// claim or remove devices of another node or driver: pool B, nodeName B,
// another driver, allNodes, a nodeSelector, perDeviceNodeSelection, and
// updating or deleting node B's slice (a slice's driver, nodeName and pool
// are immutable, so an update can only reach another node's slice through
// its old object). A token bound to no node writes nothing.
func TestDRAAdmissionPolicy(t *testing.T) {
	c := harness.NewCluster(t)
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "deployments", "xpu-dra-driver.yaml"))
	require.NoError(t, err)
	var rbac []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if !strings.Contains(doc, "\nkind: DaemonSet\n") {
			rbac = append(rbac, doc)
		}
	}
	c.Apply(t, strings.Join(rbac, "\n---\n"))

	ctx := testCtx(t)
	tokenOf := func(node string) *kubernetes.Clientset {
		t.Helper()
		_, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
		require.NoError(t, err)
		pod, err := c.Client.CoreV1().Pods(draNamespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "xpu-dra-driver-" + node},
			Spec: corev1.PodSpec{
				ServiceAccountName: draAccount, NodeName: node,
				Containers: []corev1.Container{{Name: "xpu-dra-driver", Image: "localhost/xpu-cdi:unused"}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := c.Client.CoreV1().ServiceAccounts(draNamespace).CreateToken(ctx, draAccount, &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{
				ExpirationSeconds: new(int64(600)),
				BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		cs := withToken(t, c, tr.Status.Token)
		// The token is the account's and names the pod's node.
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, "system:serviceaccount:"+draNamespace+":"+draAccount, review.Status.UserInfo.Username)
		require.Equal(t, authnv1.ExtraValue{node}, review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"])
		return cs
	}
	nodeA, nodeB := tokenOf("node-a"), tokenOf("node-b")

	slice := func(name string, edit func(*resourceapi.ResourceSliceSpec)) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   draDriver,
				NodeName: new("node-a"),
				Pool:     resourceapi.ResourcePool{Name: "node-a", ResourceSliceCount: 1},
				Devices:  []resourceapi.Device{{Name: "xpu-0"}},
			},
		}
		if edit != nil {
			edit(&s.Spec)
		}
		return s
	}
	// refusedByPolicy checks that err is the policy's denial with want in
	// its message (not a validation error of the API server).
	refusedByPolicy := func(t *testing.T, err error, want string) {
		t.Helper()
		require.Error(t, err, "the policy let it through")
		require.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+draPolicy+"'")
		require.Contains(t, err.Error(), want)
	}

	// The API server applies a new policy once its informer has it: wait
	// until a write any version of the policy refuses (node B's slice with
	// node A's token) is refused.
	require.Eventually(t, func() bool {
		_, err := nodeA.ResourceV1().ResourceSlices().Create(ctx, slice("probe", func(s *resourceapi.ResourceSliceSpec) {
			s.NodeName, s.Pool.Name = new("node-b"), "node-b"
		}), metav1.CreateOptions{})
		if err == nil {
			_ = c.Client.ResourceV1().ResourceSlices().Delete(ctx, "probe", metav1.DeleteOptions{})
		}
		return err != nil && strings.Contains(err.Error(), draPolicy)
	}, podTimeout, 250*time.Millisecond, "the policy is not in effect")

	// Node B's own slice, written with its own token.
	_, err = nodeB.ResourceV1().ResourceSlices().Create(ctx, slice("node-b-xpu", func(s *resourceapi.ResourceSliceSpec) {
		s.NodeName, s.Pool.Name = new("node-b"), "node-b"
	}), metav1.CreateOptions{})
	require.NoError(t, err, "node B writes its own slice")

	t.Run("node A creates, updates and deletes its own slice", func(t *testing.T) {
		own, err := nodeA.ResourceV1().ResourceSlices().Create(ctx, slice("node-a-xpu", nil), metav1.CreateOptions{})
		require.NoError(t, err)
		own.Spec.Devices = append(own.Spec.Devices, resourceapi.Device{Name: "xpu-1"})
		own.Spec.Pool.Generation++
		own, err = nodeA.ResourceV1().ResourceSlices().Update(ctx, own, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, nodeA.ResourceV1().ResourceSlices().Delete(ctx, own.Name, metav1.DeleteOptions{}))
	})

	for _, tc := range []struct {
		description string
		edit        func(*resourceapi.ResourceSliceSpec)
		want        string
	}{
		{"pool B", func(s *resourceapi.ResourceSliceSpec) { s.Pool.Name = "node-b" }, "of its own pool node-a, not of pool node-b"},
		{"nodeName B", func(s *resourceapi.ResourceSliceSpec) { s.NodeName = new("node-b") }, "of its own node, not of node node-b"},
		{"nodeName and pool B", func(s *resourceapi.ResourceSliceSpec) { s.NodeName, s.Pool.Name = new("node-b"), "node-b" }, "of its own node, not of node node-b"},
		{"another driver", func(s *resourceapi.ResourceSliceSpec) { s.Driver = "gpu.nvidia.com" }, "of driver xpu.baidu.com, not of driver gpu.nvidia.com"},
		{"allNodes", func(s *resourceapi.ResourceSliceSpec) { s.NodeName, s.AllNodes = nil, new(true) }, "may not write ResourceSlices with allNodes, nodeSelector or perDeviceNodeSelection"},
		{"nodeSelector", func(s *resourceapi.ResourceSliceSpec) {
			s.NodeName = nil
			s.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}},
			}}}}
		}, "may not write ResourceSlices with allNodes, nodeSelector or perDeviceNodeSelection"},
		{"perDeviceNodeSelection", func(s *resourceapi.ResourceSliceSpec) {
			s.NodeName, s.PerDeviceNodeSelection = nil, new(true)
			s.Devices[0].NodeName = new("node-a")
		}, "may not write ResourceSlices with allNodes, nodeSelector or perDeviceNodeSelection"},
	} {
		t.Run("node A may not create a slice with "+tc.description, func(t *testing.T) {
			_, err := nodeA.ResourceV1().ResourceSlices().Create(ctx, slice("forged", tc.edit), metav1.CreateOptions{})
			if err == nil { // the next case starts clean
				require.NoError(t, c.Client.ResourceV1().ResourceSlices().Delete(ctx, "forged", metav1.DeleteOptions{}))
			}
			refusedByPolicy(t, err, tc.want)
			// The admin may (the policy matches only the driver's account).
			_, err = c.Client.ResourceV1().ResourceSlices().Create(ctx, slice("forged", tc.edit), metav1.CreateOptions{})
			require.NoError(t, err, "the admin is not restricted")
			require.NoError(t, c.Client.ResourceV1().ResourceSlices().Delete(ctx, "forged", metav1.DeleteOptions{}))
		})
	}

	t.Run("node A may not delete or update node B's slice", func(t *testing.T) {
		err := nodeA.ResourceV1().ResourceSlices().Delete(ctx, "node-b-xpu", metav1.DeleteOptions{})
		refusedByPolicy(t, err, "of its own node, not of node node-b")
		b, err := c.Client.ResourceV1().ResourceSlices().Get(ctx, "node-b-xpu", metav1.GetOptions{})
		require.NoError(t, err, "node B's slice is still there")
		b.Spec.Devices = nil
		_, err = nodeA.ResourceV1().ResourceSlices().Update(ctx, b, metav1.UpdateOptions{})
		refusedByPolicy(t, err, "of its own node, not of node node-b")
	})

	t.Run("a token of the account bound to no node writes nothing", func(t *testing.T) {
		tr, err := c.Client.CoreV1().ServiceAccounts(draNamespace).CreateToken(ctx, draAccount, &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = withToken(t, c, tr.Status.Token).ResourceV1().ResourceSlices().Create(ctx, slice("unbound", nil), metav1.CreateOptions{})
		refusedByPolicy(t, err, "xpu-dra-driver on node (unknown: the token names no node) may not write ResourceSlices")
	})
}

// withToken returns a client of c's API server that authenticates with a
// bearer token only (no client certificate).
func withToken(t *testing.T, c *harness.Cluster, token string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}
