package harness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The rendered KubeletConfiguration keeps the empty values that differ
// from the kubelet's defaults, leaves out what is not set, and reads back
// (strictly) into the configuration it was made from.
func TestMarshalKubeletConfig(t *testing.T) {
	dirs := KubeletDirs{StaticPods: "/t/manifests", PodLogs: "/t/pod-logs", VolumePlugins: "/t/volume-plugins"}
	for _, tc := range []struct {
		description string
		edit        func(*kubeletconfig.KubeletConfiguration)
		want        map[string]any
		absent      []string
	}{
		{
			description: "the common configuration",
			edit:        func(*kubeletconfig.KubeletConfiguration) {},
			want: map[string]any{
				"enforceNodeAllocatable": []any{},
				"evictionHard":           map[string]any{},
				"resolvConf":             "",
				"failSwapOn":             false,
				"fileCheckFrequency":     "1s",
				"healthzPort":            float64(20002),
				"authentication": map[string]any{
					"anonymous": map[string]any{"enabled": true},
					"webhook":   map[string]any{"enabled": false},
				},
				"authorization": map[string]any{"mode": "AlwaysAllow"},
			},
			// Unset: a zero duration, a struct section, a nil map.
			absent: []string{"runtimeRequestTimeout", "logging", "evictionSoft", "readOnlyPort", "cgroupRoot"},
		},
		{
			description: "a cluster kubelet's",
			edit: func(cfg *kubeletconfig.KubeletConfiguration) {
				cfg.CgroupsPerQOS = ptr.To(true)
				cfg.CgroupRoot = "/xe2e"
				cfg.NodeStatusUpdateFrequency = metav1.Duration{Duration: 2 * time.Second}
				cfg.Authentication.Anonymous.Enabled = ptr.To(false)
				cfg.Authentication.X509.ClientCAFile = "/t/ca.crt"
				cfg.EvictionSoft = map[string]string{}
			},
			want: map[string]any{
				"cgroupsPerQOS":             true,
				"cgroupRoot":                "/xe2e",
				"nodeStatusUpdateFrequency": "2s",
				"evictionSoft":              map[string]any{},
				"authentication": map[string]any{
					"anonymous": map[string]any{"enabled": false},
					"webhook":   map[string]any{"enabled": false},
					"x509":      map[string]any{"clientCAFile": "/t/ca.crt"},
				},
			},
		},
		{
			description: "eviction thresholds of the test's",
			edit: func(cfg *kubeletconfig.KubeletConfiguration) {
				cfg.EvictionHard = map[string]string{"memory.available": "1Mi"}
				cfg.EnforceNodeAllocatable = nil
			},
			want:   map[string]any{"evictionHard": map[string]any{"memory.available": "1Mi"}},
			absent: []string{"enforceNodeAllocatable"},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			cfg := KubeletConfig(dirs, 20001, 20002, "unix:///t/containerd.sock")
			tc.edit(cfg)
			data, err := MarshalKubeletConfig(cfg)
			require.NoError(t, err)

			var fields map[string]any
			require.NoError(t, yaml.Unmarshal(data, &fields))
			for key, want := range tc.want {
				require.Equal(t, want, fields[key], "%s in\n%s", key, data)
			}
			for _, key := range tc.absent {
				require.NotContains(t, fields, key, "in\n%s", data)
			}
			require.NotContains(t, string(data), ": 0s", "an unset duration is written")

			var back kubeletconfig.KubeletConfiguration
			require.NoError(t, yaml.UnmarshalStrict(data, &back))
			require.Equal(t, *cfg, back)
		})
	}
}
