package deployments

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/cel"
	"sigs.k8s.io/yaml"
)

// decodeAll decodes the documents of file strictly into the types of their kinds.
func decodeAll(t *testing.T, file string) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, doc := range documents(data) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal(doc, &obj))
		out[obj.Kind+"/"+obj.Metadata.Name] = doc
	}
	return out
}

func TestDRADriverManifest(t *testing.T) {
	docs := decodeAll(t, "xpu-dra-driver.yaml")
	var sa corev1.ServiceAccount
	require.NoError(t, yaml.UnmarshalStrict(docs["ServiceAccount/xpu-dra-driver"], &sa))
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict(docs["ClusterRole/xpu-dra-driver"], &role))
	var binding rbacv1.ClusterRoleBinding
	require.NoError(t, yaml.UnmarshalStrict(docs["ClusterRoleBinding/xpu-dra-driver"], &binding))
	var ds appsv1.DaemonSet
	require.NoError(t, yaml.UnmarshalStrict(docs["DaemonSet/xpu-dra-driver"], &ds))
	var vap admissionv1.ValidatingAdmissionPolicy
	require.NoError(t, yaml.UnmarshalStrict(docs["ValidatingAdmissionPolicy/xpu-dra-driver-resourceslices"], &vap))
	var vapb admissionv1.ValidatingAdmissionPolicyBinding
	require.NoError(t, yaml.UnmarshalStrict(docs["ValidatingAdmissionPolicyBinding/xpu-dra-driver-resourceslices"], &vapb))

	// RBAC: claims read only, slices written, nothing else.
	verbs := map[string][]string{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			verbs[res] = r.Verbs
		}
	}
	require.Equal(t, map[string][]string{
		"resourceclaims": {"get"},
		"nodes":          {"get"},
		"resourceslices": {"get", "list", "watch", "create", "update", "patch", "delete"},
	}, verbs)
	require.Equal(t, "xpu-dra-driver", binding.RoleRef.Name)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}, binding.Subjects)

	// The policy binds the driver's account and denies.
	require.Equal(t, vap.Name, vapb.Spec.PolicyName)
	require.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, vapb.Spec.ValidationActions)
	require.Contains(t, vap.Spec.MatchConditions[0].Expression, `"system:serviceaccount:`+sa.Namespace+`:`+sa.Name+`"`)
	require.Equal(t, []string{"resourceslices"}, []string(vap.Spec.MatchConstraints.ResourceRules[0].Resources))
	require.ElementsMatch(t, []admissionv1.OperationType{"CREATE", "UPDATE", "DELETE"}, vap.Spec.MatchConstraints.ResourceRules[0].Operations)

	// The DaemonSet.
	require.Equal(t, sa.Namespace, ds.Namespace)
	pod := ds.Spec.Template.Spec
	require.Equal(t, sa.Name, pod.ServiceAccountName)
	require.Contains(t, affinity(&ds), "baidu.com/xpu.present=true")
	require.Equal(t, "system-node-critical", pod.PriorityClassName)
	// The new pod answers before the old one stops: the helper's
	// rolling-update sockets, turned on by the pod's UID.
	require.Equal(t, int32(1), ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge.IntVal, "maxSurge")
	require.Equal(t, int32(0), ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.IntVal, "maxUnavailable")
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Equal(t, []string{"/usr/bin/xpu-dra-driver"}, c.Command)
	require.Nil(t, c.SecurityContext.Privileged)
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	help := mainHelpEnv(t, "../cmd/xpu-dra-driver/main.go", "../internal/cmdflags/kubeclient/kubeclient.go")
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		require.Contains(t, help, `"`+e.Name+`"`, "xpu-dra-driver does not read %s", e.Name)
		env[e.Name] = e
	}
	require.Equal(t, "spec.nodeName", env["NODE_NAME"].ValueFrom.FieldRef.FieldPath)
	require.Equal(t, "metadata.uid", env["POD_UID"].ValueFrom.FieldRef.FieldPath)

	mounts, hostOf := hostPathMounts(t, &pod, &c)
	// The kubelet's directories at the same paths, writable; the plugin
	// data directory is the one of the driver name.
	driver := env["XPU_CDI_DRA_DRIVER_NAME"].Value
	for _, d := range []string{"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins/" + driver} {
		require.Equal(t, d, hostOf(d))
		require.False(t, mounts[d].ReadOnly, d)
	}
	root := env["XPU_CDI_DEV_ROOT"].Value
	for _, d := range []string{"dev", "proc", "sys"} {
		require.Equal(t, "/"+d, hostOf(root+"/"+d))
		require.True(t, mounts[root+"/"+d].ReadOnly, "/%s must be read-only", d)
	}
	require.Equal(t, "/usr/local", hostOf(env["XPU_CDI_DRIVER_ROOT"].Value+"/usr/local"))
	for _, d := range []string{"/etc/cdi", "/var/run/cdi"} {
		require.Equal(t, d, hostOf(d))
		require.True(t, mounts[d].ReadOnly)
	}
}

// The DeviceClasses decode strictly, their selectors compile, and each
// selects exactly the devices of its generation from the slices the
// driver publishes for the fake hosts (internal/dra/testdata).
func TestDeviceClasses(t *testing.T) {
	docs := decodeAll(t, "xpu-dra-deviceclasses.yaml")
	classes := map[string]resourceapi.DeviceClass{}
	for name, doc := range docs {
		var dc resourceapi.DeviceClass
		require.NoError(t, yaml.UnmarshalStrict(doc, &dc), name)
		classes[dc.Name] = dc
	}
	require.Len(t, classes, 9, "every XPU, three families, five partition sizes")
	for _, size := range partitionSizes {
		require.Contains(t, classes, "xpu-"+size+".baidu.com")
	}
	require.Equal(t, "baidu.com/xpu", *classes["xpu.baidu.com"].Spec.ExtendedResourceName)
	for name, dc := range classes {
		if name != "xpu.baidu.com" {
			require.Nil(t, dc.Spec.ExtendedResourceName, "only one class serves baidu.com/xpu")
		}
	}

	checkClassSelection(t, classes, "xpu.baidu.com")
}

// checkClassSelection runs the selectors of the classes (the class named
// driver for every XPU, kunlunN.driver per generation) on the devices of
// the slices the driver publishes for the fake hosts (internal/dra/testdata),
// as published by a driver of that name: each class selects exactly its
// devices, and none selects another driver's.
func checkClassSelection(t *testing.T, classes map[string]resourceapi.DeviceClass, driver string) {
	t.Helper()
	slices, err := filepath.Glob("../internal/dra/testdata/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, slices)
	compiler := cel.GetCompiler(cel.Features{})
	matches := func(dc resourceapi.DeviceClass, driver string, d resourceapi.Device) bool {
		for _, s := range dc.Spec.Selectors {
			r := compiler.CompileCELExpression(s.CEL.Expression, cel.Options{})
			require.Nil(t, r.Error, "%s: %s", dc.Name, s.CEL.Expression)
			ok, _, err := r.DeviceMatches(context.Background(), cel.Device{Driver: driver, Attributes: d.Attributes, Capacity: d.Capacity})
			require.NoError(t, err, "%s on %s", dc.Name, d.Name)
			if !ok {
				return false
			}
		}
		return true
	}
	// The offers of dynamic partitions (a document per slice) are counted
	// apart: every slot of every count of every SR-IOV card.
	dynamic, err := filepath.Glob("../internal/dra/testdata/dynamic/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, dynamic)
	selected, selectedDynamic := map[string]int{}, map[string]int{}
	for _, f := range append(slices, dynamic...) {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		count := selected
		if strings.Contains(f, "/dynamic/") {
			count = selectedDynamic
		}
		var devices []resourceapi.Device
		for _, doc := range strings.Split(string(data), "---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var s resourceapi.ResourceSlice
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &s))
			devices = append(devices, s.Spec.Devices...)
		}
		for _, d := range devices {
			family := ""
			if a, ok := d.Attributes["family"]; ok {
				family = *a.StringValue
			}
			if all, ok := classes[driver]; ok {
				require.True(t, matches(all, driver, d), "%s %s", f, d.Name)
				// Another driver's device is in none of them.
				require.False(t, matches(all, "gpu.example.com", d))
			}
			first, rest, _ := strings.Cut(driver, ".")
			for _, size := range partitionSizes {
				name := first + "-" + size + "." + rest
				dc, ok := classes[name]
				if !ok {
					continue
				}
				_, partition := d.Attributes["partition"]
				want := false
				if c, ok := d.Capacity["memory"]; ok && partition {
					q := c.Value
					want = q.Cmp(resource.MustParse(strings.Replace(strings.Replace(size, "gb", "Gi", 1), "mb", "Mi", 1))) == 0
				}
				require.Equal(t, want, matches(dc, driver, d), "%s on %s %s", name, f, d.Name)
				require.False(t, matches(dc, "gpu.example.com", d))
				if want {
					count[name]++
				}
			}
			for _, gen := range []string{"Kunlun1", "Kunlun2", "Kunlun3"} {
				name := strings.ToLower(gen) + "." + driver
				if dc, ok := classes[name]; ok {
					require.Equal(t, family == gen, matches(dc, driver, d), "%s on %s %s (family %q)", name, f, d.Name, family)
					require.False(t, matches(dc, "gpu.example.com", d))
				}
			}
		}
	}
	// The fake hosts' partitions: two P800 halves, four quarters, three R200 5gb VFs.
	first, rest, _ := strings.Cut(driver, ".")
	for size, n := range map[string]int{"48gb": 2, "24gb": 4, "5gb": 3} {
		if _, ok := classes[first+"-"+size+"."+rest]; ok {
			require.Equal(t, n, selected[first+"-"+size+"."+rest], size)
		}
	}
	// Dynamic: two P800s of 2 halves and 4 quarters each, two R200s of
	// 1, 2 and 3 VFs each.
	for size, n := range map[string]int{"48gb": 4, "24gb": 8, "16gb": 2, "8gb": 4, "5gb": 6} {
		if _, ok := classes[first+"-"+size+"."+rest]; ok {
			require.Equal(t, n, selectedDynamic[first+"-"+size+"."+rest], "dynamic %s", size)
		}
	}
}

// partitionSizes are the sizes of the chart's partition DeviceClasses.
var partitionSizes = []string{"48gb", "24gb", "16gb", "8gb", "5gb"}

// The selector docs/dra.md and docs/partitions.md give for "an XPU with at
// least 40Gi", evaluated as the scheduler does on the slices of the fake
// hosts: on p800-sriov the two 48 GiB halves and the whole card.
func TestMemorySelector(t *testing.T) {
	compiler := cel.GetCompiler(cel.Features{})
	for _, tc := range []struct {
		expr, slice string
		want        []string
	}{
		{`device.capacity["xpu.baidu.com"].memory.compareTo(quantity("40Gi")) >= 0`, "p800-sriov", []string{"xpu-1", "xpu-2", "xpu-3"}},
		{`device.capacity["xpu.baidu.com"].memory.compareTo(quantity("40Gi")) >= 0 && "partition" in device.attributes["xpu.baidu.com"]`, "p800-sriov", []string{"xpu-1", "xpu-2"}},
		{`"memory" in device.capacity["xpu.baidu.com"] && device.capacity["xpu.baidu.com"].memory.compareTo(quantity("4Gi")) >= 0 && "partition" in device.attributes["xpu.baidu.com"]`, "r200-sriov", []string{"xpu-2", "xpu-3", "xpu-4"}},
	} {
		r := compiler.CompileCELExpression(tc.expr, cel.Options{})
		require.Nil(t, r.Error, tc.expr)
		data, err := os.ReadFile(filepath.Join("../internal/dra/testdata", tc.slice+".yaml"))
		require.NoError(t, err)
		var s resourceapi.ResourceSlice
		require.NoError(t, yaml.UnmarshalStrict(data, &s))
		var got []string
		for _, d := range s.Spec.Devices {
			ok, _, err := r.DeviceMatches(context.Background(), cel.Device{Driver: s.Spec.Driver, Attributes: d.Attributes, Capacity: d.Capacity})
			require.NoError(t, err, "%s on %s", tc.expr, d.Name)
			if ok {
				got = append(got, d.Name)
			}
		}
		require.Equal(t, tc.want, got, "%s on %s", tc.expr, tc.slice)
	}
}

// The claims docs/dra.md shows decode strictly, and their CEL compiles.
func TestDocumentedClaims(t *testing.T) {
	data, err := os.ReadFile("../docs/dra.md")
	require.NoError(t, err)
	var blocks []string
	for _, part := range strings.Split(string(data), "```yaml\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		require.True(t, ok)
		if strings.Contains(block, "apiVersion: resource.k8s.io/v1") {
			blocks = append(blocks, block)
		}
	}
	require.NotEmpty(t, blocks)
	kinds := map[string]int{}
	for _, block := range blocks {
		for k, n := range decodeClaimsAndPods(t, []byte(block)) {
			kinds[k] += n
		}
	}
	require.Equal(t, 6, kinds["ResourceClaimTemplate"]+kinds["ResourceClaim"], "%v", kinds)
}

// decodeClaimsAndPods decodes every document of data strictly as a
// ResourceClaimTemplate, ResourceClaim or Pod (anything else fails),
// compiles the CEL selectors of the claims' requests, and counts the kinds.
func decodeClaimsAndPods(t *testing.T, data []byte) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	compiler := cel.GetCompiler(cel.Features{})
	for i, doc := range documents(data) {
		var tm struct {
			Kind string `json:"kind"`
		}
		require.NoError(t, yaml.Unmarshal(doc, &tm))
		kinds[tm.Kind]++
		var requests []resourceapi.DeviceRequest
		switch tm.Kind {
		case "ResourceClaimTemplate":
			var o resourceapi.ResourceClaimTemplate
			require.NoError(t, yaml.UnmarshalStrict(doc, &o), "document %d", i)
			requests = o.Spec.Spec.Devices.Requests
		case "ResourceClaim":
			var o resourceapi.ResourceClaim
			require.NoError(t, yaml.UnmarshalStrict(doc, &o), "document %d", i)
			requests = o.Spec.Devices.Requests
		case "Pod":
			require.NoError(t, yaml.UnmarshalStrict(doc, &corev1.Pod{}), "document %d", i)
		default:
			t.Fatalf("document %d: %s is not a claim, a claim template or a pod", i, tm.Kind)
		}
		for _, r := range requests {
			require.NotNil(t, r.Exactly, r.Name)
			for _, s := range r.Exactly.Selectors {
				require.Nil(t, compiler.CompileCELExpression(s.CEL.Expression, cel.Options{}).Error, s.CEL.Expression)
			}
		}
	}
	return kinds
}
