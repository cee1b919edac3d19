package deployments

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestProbes: both daemons' DaemonSets probe the health endpoint on the
// port the daemon listens on by default (--health-address): liveness on
// /healthz, readiness on /readyz. The chart's copies are kept equal by
// the chart tests.
func TestProbes(t *testing.T) {
	plugin, err := os.ReadFile("xpu-device-plugin.yaml")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		doc  []byte
		port int32
		// probePort is how the probes name the port: the DRA driver
		// declares none (on the host network it would be a host port that
		// keeps its rolling update's surge pod off the node).
		ports     []corev1.ContainerPort
		probePort string
	}{
		{name: "xpu-device-plugin", doc: plugin, port: 9508, ports: []corev1.ContainerPort{{Name: "health", ContainerPort: 9508}}, probePort: "health"},
		{name: "xpu-dra-driver", doc: decodeAll(t, "xpu-dra-driver.yaml")["DaemonSet/xpu-dra-driver"], port: 9509, probePort: "9509"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ds appsv1.DaemonSet
			require.NoError(t, yaml.UnmarshalStrict(tc.doc, &ds))
			c := ds.Spec.Template.Spec.Containers[0]
			require.Equal(t, tc.ports, c.Ports)
			for path, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
				require.NotNil(t, p, path)
				require.Equal(t, path, p.HTTPGet.Path)
				require.Equal(t, tc.probePort, p.HTTPGet.Port.String())
			}
			for _, e := range c.Env {
				require.NotEqual(t, "XPU_CDI_HEALTH_ADDRESS", e.Name, "the probes assume the default port")
			}
		})
	}
}
