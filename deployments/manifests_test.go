// Package deployments holds the Kubernetes manifests of xpu-cdi; its test
// decodes them strictly with the Kubernetes API types.
package deployments

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// documents splits a multi-document YAML file.
func documents(data []byte) [][]byte {
	var out [][]byte
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) != "" {
			out = append(out, []byte(doc))
		}
	}
	return out
}

func TestManifestsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, doc := range documents(data) {
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal(doc, &tm), "%s document %d", f, i)
			var obj any
			switch tm.APIVersion + "/" + tm.Kind {
			case "apps/v1/DaemonSet":
				obj = &appsv1.DaemonSet{}
			case "v1/ServiceAccount":
				obj = &corev1.ServiceAccount{}
			case "rbac.authorization.k8s.io/v1/ClusterRole":
				obj = &rbacv1.ClusterRole{}
			case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
				obj = &rbacv1.ClusterRoleBinding{}
			case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy":
				obj = &admissionv1.ValidatingAdmissionPolicy{}
			case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding":
				obj = &admissionv1.ValidatingAdmissionPolicyBinding{}
			case "resource.k8s.io/v1/DeviceClass":
				obj = &resourceapi.DeviceClass{}
			default:
				t.Fatalf("%s document %d: no decoder for %s %s: add one to this test", f, i, tm.APIVersion, tm.Kind)
			}
			require.NoError(t, yaml.UnmarshalStrict(doc, obj), "%s document %d", f, i)
		}
	}
}

func TestDevicePluginDaemonSet(t *testing.T) {
	data, err := os.ReadFile("xpu-device-plugin.yaml")
	require.NoError(t, err)
	var ds appsv1.DaemonSet
	require.NoError(t, yaml.UnmarshalStrict(data, &ds))

	require.Equal(t, "kube-system", ds.Namespace)
	for k, v := range ds.Spec.Selector.MatchLabels {
		require.Equal(t, v, ds.Spec.Template.Labels[k], "the selector must match the pod template")
	}
	pod := ds.Spec.Template.Spec
	require.Contains(t, affinity(&ds), "baidu.com/xpu.present=true")
	require.Equal(t, "system-node-critical", pod.PriorityClassName)
	require.Empty(t, pod.ServiceAccountName, "the plugin never calls the API server")
	require.NotNil(t, pod.AutomountServiceAccountToken)
	require.False(t, *pod.AutomountServiceAccountToken)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Equal(t, []string{"/usr/bin/xpu-device-plugin"}, c.Command)
	require.NotNil(t, c.SecurityContext)
	require.Nil(t, c.SecurityContext.Privileged, "no privilege: the plugin only stats and reads")
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)

	// Every variable is one the binary reads (its --help lists them).
	help := mainHelpEnv(t, "../cmd/xpu-device-plugin/main.go")
	env := map[string]string{}
	for _, e := range c.Env {
		require.Contains(t, help, e.Name, "xpu-device-plugin does not read %s", e.Name)
		env[e.Name] = e.Value
	}

	mounts, hostOf := hostPathMounts(t, &pod, &c)
	// The kubelet's directory, writable: the plugin creates its socket there.
	require.Equal(t, "/var/lib/kubelet/device-plugins", hostOf("/var/lib/kubelet/device-plugins"))
	require.False(t, mounts["/var/lib/kubelet/device-plugins"].ReadOnly)
	// The dev root holds the host's /dev, /proc and /sys, read-only.
	root := env["XPU_CDI_DEV_ROOT"]
	for _, d := range []string{"dev", "proc", "sys"} {
		require.Equal(t, "/"+d, hostOf(root+"/"+d))
		require.True(t, mounts[root+"/"+d].ReadOnly, "/%s must be read-only", d)
	}
	// The CDI spec directories the engines read, at the same paths.
	for _, d := range []string{"/etc/cdi", "/var/run/cdi"} {
		require.Equal(t, d, hostOf(d))
		require.True(t, mounts[d].ReadOnly)
	}
}

// hostPathMounts checks that every volume of pod is a hostPath and every
// mount of c has its volume; it returns c's mounts by container path and a
// function giving the host path mounted at a container path (a missing mount
// fails the test).
func hostPathMounts(t *testing.T, pod *corev1.PodSpec, c *corev1.Container) (map[string]corev1.VolumeMount, func(string) string) {
	t.Helper()
	volumes := map[string]*corev1.HostPathVolumeSource{}
	for _, v := range pod.Volumes {
		require.NotNil(t, v.HostPath, "volume %s", v.Name)
		volumes[v.Name] = v.HostPath
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		require.Contains(t, volumes, m.Name, "mount %s has no volume", m.Name)
		mounts[m.MountPath] = m
	}
	return mounts, func(mountPath string) string {
		t.Helper()
		m, ok := mounts[mountPath]
		require.True(t, ok, "nothing mounted at %s", mountPath)
		return volumes[m.Name].Path
	}
}

// daemonFlagGroups are the sources of the flag groups (internal/cmdflags)
// both daemons use.
var daemonFlagGroups = []string{
	"../internal/cmdflags/host.go", "../internal/cmdflags/kind.go",
	"../internal/cmdflags/specdirs.go", "../internal/cmdflags/loglevel.go",
	"../internal/cmdflags/kubelet.go",
}

// mainHelpEnv returns the environment variables the flags of a command
// (its main.go and the flag groups it uses) name, read from its source
// (the test does not build the binary).
func mainHelpEnv(t *testing.T, main string, groups ...string) string {
	t.Helper()
	var all bytes.Buffer
	for _, f := range append(append([]string{main}, daemonFlagGroups...), groups...) {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		all.Write(data)
	}
	var names []string
	for _, m := range regexp.MustCompile(`EnvVars:\s*\[\]string\{([^}]*)\}`).FindAllStringSubmatch(all.String(), -1) {
		names = append(names, m[1])
	}
	return strings.Join(names, " ")
}

// TestStrictDecodingRejectsTypos makes sure the decoding above can fail.
func TestStrictDecodingRejectsTypos(t *testing.T) {
	data, err := os.ReadFile("xpu-device-plugin.yaml")
	require.NoError(t, err)
	for _, bad := range []string{
		strings.Replace(string(data), "nodeSelector:", "nodeSelecter:", 1),
		strings.Replace(string(data), "      volumes:\n", "      volumes:\n        - name: dup\n          name: dup2\n", 1),
	} {
		require.NotEqual(t, string(data), bad)
		require.Error(t, yaml.UnmarshalStrict([]byte(bad), &appsv1.DaemonSet{}))
	}
}

// TestManifestsNameMakeImage: the image the plain manifests name is one
// `make image` makes (its dry run tags the list it builds with it), whatever
// the version.
func TestManifestsNameMakeImage(t *testing.T) {
	testreq.InstalledTool(t, "make")
	images := map[string]bool{}
	for _, f := range []string{"xpu-device-plugin.yaml", "xpu-dra-driver.yaml"} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`(?m)^\s+image: "?([^"\s]+)"?$`).FindAllStringSubmatch(string(data), -1) {
			images[m[1]] = true
		}
	}
	require.Len(t, images, 1, "one image for every manifest: %v", images)
	cmd := exec.Command("make", "--no-print-directory", "-n", "image", "IMAGE_ARCHES=amd64", "VERSION=v9.8.7-3-gabcdef", "PODMAN=podman")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make -n image:\n%s", out)
	for image := range images {
		require.Contains(t, string(out), "podman manifest create localhost/xpu-cdi:v9.8.7-3-gabcdef\n")
		require.Contains(t, string(out), "; podman tag localhost/xpu-cdi:v9.8.7-3-gabcdef "+image+" || exit 1", "make image tags the manifests' %s", image)
	}
}
