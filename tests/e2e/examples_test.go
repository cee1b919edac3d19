package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

// example returns the manifests of examples/<file> for the test cluster:
// every document decoded strictly (as deployments/examples_test.go checks),
// in namespace default, and each pod changed only where the test cluster
// needs it: image (a local one, never pulled), a sleeping command (the
// tests exec into it), host networking (no CNI network) and no grace period.
func example(t testing.TB, file, image string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "examples", file))
	require.NoError(t, err)
	var out []string
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		var tm struct {
			Kind string `json:"kind"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &tm), "%s document %d", file, i)
		var obj any
		switch tm.Kind {
		case "Pod":
			var pod corev1.Pod
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &pod), "%s document %d", file, i)
			pod.Namespace = "default"
			pod.Spec.HostNetwork = true
			grace := int64(0)
			pod.Spec.TerminationGracePeriodSeconds = &grace
			for j := range pod.Spec.Containers {
				c := &pod.Spec.Containers[j]
				c.Image, c.ImagePullPolicy = image, corev1.PullNever
				c.Command = []string{"sleep", "2147483647"}
			}
			obj = &pod
		case "ResourceClaimTemplate":
			var o resourceapi.ResourceClaimTemplate
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &o), "%s document %d", file, i)
			o.Namespace = "default"
			obj = &o
		case "ResourceClaim":
			var o resourceapi.ResourceClaim
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &o), "%s document %d", file, i)
			o.Namespace = "default"
			obj = &o
		default:
			t.Fatalf("%s document %d: kind %q is not an example's", file, i, tm.Kind)
		}
		b, err := yaml.Marshal(obj)
		require.NoError(t, err)
		out = append(out, string(bytes.TrimSpace(b)))
	}
	return strings.Join(out, "\n---\n") + "\n"
}

// TestExampleManifests: example turns every file of examples/ into
// manifests the test cluster takes, without a cluster.
func TestExampleManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(moduleRoot(t), "examples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		m := example(t, filepath.Base(f), "localhost/img:1")
		require.Contains(t, m, "image: localhost/img:1")
		require.Contains(t, m, "hostNetwork: true")
		require.NotContains(t, m, "registry.example.com")
	}
}
