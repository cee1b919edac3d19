package deployments

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Every example of examples/ decodes strictly, its CEL compiles, and every
// pod asks for XPUs: through its limits or through a claim of its file.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 6)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			kinds := decodeClaimsAndPods(t, data)
			require.NotZero(t, kinds["Pod"], "an example shows a pod")
			for _, doc := range documents(data) {
				var pod corev1.Pod
				require.NoError(t, yaml.Unmarshal(doc, &pod))
				if pod.Kind != "Pod" {
					continue
				}
				c := pod.Spec.Containers[0]
				_, limits := c.Resources.Limits["baidu.com/xpu"]
				require.True(t, limits || len(c.Resources.Claims) > 0, "pod %s asks for no XPU", pod.Name)
				require.Equal(t, limits, kinds["ResourceClaim"]+kinds["ResourceClaimTemplate"] == 0,
					"pod %s: limits without claims in the file, or claims without limits", pod.Name)
			}
		})
	}
}
