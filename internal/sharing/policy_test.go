package sharing

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
)

// A file shares each resource of the plugin on its own: the whole cards
// and each partition size (RESOURCE-SIZE), renamed alike by default.
func TestPolicyPerResource(t *testing.T) {
	p, err := ParsePolicy([]byte(`
version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: baidu.com/xpu-24gb
      replicas: 4
    - name: baidu.com/xpu-48gb
      rename: baidu.com/half-ts
      replicas: 2
`), res)
	require.NoError(t, err)
	require.Equal(t, None(res), p.For(res), "the whole cards are not named: not shared")
	require.Equal(t, Config{Replicas: 4, ResourceName: "baidu.com/xpu-24gb.shared"}, p.For("baidu.com/xpu-24gb"))
	require.Equal(t, Config{Replicas: 2, ResourceName: "baidu.com/half-ts"}, p.For("baidu.com/xpu-48gb"))
	require.Equal(t, None("baidu.com/xpu-5gb"), p.For("baidu.com/xpu-5gb"))
	require.Equal(t, []string{"baidu.com/xpu-24gb.shared", "baidu.com/half-ts"}, p.Renames())

	// Parse, for one resource, still reads the same file.
	c, err := Parse([]byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: baidu.com/xpu-24gb\n      replicas: 4\n"), res)
	require.NoError(t, err)
	require.Equal(t, None(res), c)

	flags, err := PolicyFromFlags(res, Flags{Replicas: 3, RenameByDefault: true, FailRequestsGreaterThanOne: true})
	require.NoError(t, err)
	require.Equal(t, Config{Replicas: 3, ResourceName: "baidu.com/xpu-5gb.shared", FailRequestsGreaterThanOne: true}, flags.For("baidu.com/xpu-5gb"))
	require.Equal(t, Config{Replicas: 3, ResourceName: "baidu.com/xpu.shared", FailRequestsGreaterThanOne: true}, flags.For(res))
	require.Equal(t, None("baidu.com/xpu-5gb"), Policy{}.For("baidu.com/xpu-5gb"), "the zero value shares nothing")
}

func TestPolicyRefusals(t *testing.T) {
	for _, tc := range []struct{ description, yaml, err string }{
		{
			"another plugin's resource", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n",
			`sharing.timeSlicing.resources[0].name "nvidia.com/gpu" is not this plugin's resource baidu.com/xpu nor one of its partition sizes`,
		},
		{
			"not a size", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: baidu.com/xpu-half\n      replicas: 2\n",
			`"baidu.com/xpu-half" is not this plugin's resource`,
		},
		{
			"a size twice", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: baidu.com/xpu-24gb\n      replicas: 2\n    - name: baidu.com/xpu-24gb\n      replicas: 3\n",
			"resources[1].name: baidu.com/xpu-24gb is named twice",
		},
		{
			"renamed to another resource", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: baidu.com/xpu\n      rename: baidu.com/xpu-48gb\n      replicas: 2\n",
			"baidu.com/xpu is renamed baidu.com/xpu-48gb, the name of another resource of this plugin",
		},
		{
			"two renamed alike", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: baidu.com/xpu\n      rename: baidu.com/ts\n      replicas: 2\n    - name: baidu.com/xpu-24gb\n      rename: baidu.com/ts\n      replicas: 2\n",
			"baidu.com/xpu and baidu.com/xpu-24gb are both renamed baidu.com/ts",
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.yaml), res)
			require.ErrorContains(t, err, tc.err)
		})
	}
	require.False(t, names.IsPartitionResource(res, "baidu.com/xpu-0gb"))
	require.False(t, names.IsPartitionResource(res, "baidu.com/xpu.shared"))
	require.True(t, names.IsPartitionResource(res, "baidu.com/xpu-16gb"))
}
