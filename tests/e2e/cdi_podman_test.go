package e2e

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// listXPUs is run inside containers: the xpu nodes with their numbers, one
// per line ("/dev/xpu0 243:0"), then the XPU variables.
const listXPUs = `for n in /dev/xpu*; do [ -e "$n" ] && echo "$n $(stat -c '%t:%T' "$n")"; done; env | grep '^XPU' | sort`

// parseNodes returns node -> "major:minor" (decimal) from listXPUs output.
func parseNodes(t *testing.T, out string) (map[string]string, []string) {
	t.Helper()
	nodes := map[string]string{}
	var env []string
	re := regexp.MustCompile(`^(/dev/xpu\S*) ([0-9a-f]+):([0-9a-f]+)$`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			var maj, min int
			_, err := fmt.Sscanf(m[2]+" "+m[3], "%x %x", &maj, &min)
			require.NoError(t, err)
			nodes[m[1]] = fmt.Sprintf("%d:%d", maj, min)
		} else if strings.HasPrefix(line, "XPU") {
			env = append(env, line)
		}
	}
	sort.Strings(env)
	return nodes, env
}

// expect returns the nodes and variables a container given devices idx must
// see, from what the fake host builder made.
func expect(tree *fakehost.Tree, idx ...int) (map[string]string, []string) {
	ctrl := fakehost.CtrlMinor
	if tree.Host.CtrlMinor != 0 { // driver 5.x: 195:255
		ctrl = tree.Host.CtrlMinor
	}
	nodes := map[string]string{"/dev/xpuctrl": fmt.Sprintf("%d:%d", tree.Major, ctrl)}
	var env []string
	for _, i := range idx {
		for _, d := range tree.Devices {
			if d.Index == i {
				nodes[d.Path] = fmt.Sprintf("%d:%d", d.Major, d.Minor)
				env = append(env, fmt.Sprintf("XPU_CDI_DEVICE_%d=%s", i, d.BDF))
			}
		}
	}
	sort.Strings(env)
	return nodes, env
}

// TestPodmanCDI runs real Podman 4.3.1 with a spec written by xpu-cdi for a
// fake 8-device P800 host.
func TestPodmanCDI(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	p := harness.NewPodman(t)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	p.ImportImage(t, rootfs, "xpu-e2e-busybox")
	vendor := harness.UniqueVendor(t)
	spec := GenerateSpec(t, tree, vendor)
	require.Contains(t, string(spec), `cdiVersion: "0.5.0"`)
	p.InstallSpec(t, spec, vendor)
	kind := vendor + "/xpu"

	for _, tc := range []struct {
		description string
		devices     []string
		want        []int
	}{
		{"one device by index", []string{"0"}, []int{0}},
		{"two devices: 0 and 3", []string{"0", "3"}, []int{0, 3}},
		{"two devices, other order", []string{"3", "0"}, []int{0, 3}},
		{"by PCI address", []string{tree.Devices[5].BDF}, []int{5}},
		{"by serial", []string{tree.Devices[6].Serial}, []int{6}},
		{"all", []string{"all"}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			args := []string{"run", "--rm"}
			for _, d := range tc.devices {
				args = append(args, "--device", kind+"="+d)
			}
			r := p.MustRun(t, append(args, "xpu-e2e-busybox", "sh", "-c", listXPUs)...)
			nodes, env := parseNodes(t, r.Stdout)
			wantNodes, wantEnv := expect(tree, tc.want...)
			require.Equal(t, wantNodes, nodes, "exactly the requested nodes and /dev/xpuctrl, with the host's major:minor")
			require.Equal(t, wantEnv, env, "one XPU_CDI_DEVICE_<N> per granted device and nothing else (no wrong XPU_VISIBLE_DEVICES)")
		})
	}

	t.Run("driver files and xpu-smi", func(t *testing.T) {
		r := p.MustRun(t, "run", "--rm", "--device", kind+"=1", "xpu-e2e-busybox", "sh", "-c",
			"ls /usr/local/xpu/lib64; xpu-smi; xpu_smi >/dev/null && echo alias-ok; touch /usr/local/xpu/lib64/libxpurt.so.1 2>&1 || echo read-only")
		for _, lib := range []string{"libxpurt.so.1", "libxpurt.so", "libxpuml.so.1", "libbkcl.so"} {
			require.Contains(t, r.Stdout, lib+"\n")
		}
		require.Contains(t, r.Stdout, "/dev/xpu1")
		require.NotContains(t, r.Stdout, "/dev/xpu0 ", "xpu-smi sees only the granted device")
		require.Contains(t, r.Stdout, "alias-ok")
		require.Contains(t, r.Stdout, "read-only")
	})

	t.Run("nodes-only spec", func(t *testing.T) {
		v := harness.UniqueVendor(t)
		p.InstallSpec(t, GenerateSpec(t, tree, v, "--nodes-only"), v)
		r := p.MustRun(t, "run", "--rm", "--device", v+"/xpu=2", "xpu-e2e-busybox", "sh", "-c",
			"ls /usr/local/xpu/lib64 2>&1; ls /dev/xpu2 && xpu-smi >/dev/null && echo smi-ok")
		require.Contains(t, r.Stdout, "No such file")
		require.Contains(t, r.Stdout, "smi-ok")
	})

	t.Run("unknown device is refused", func(t *testing.T) {
		r := p.Run(t, "run", "--rm", "--device", kind+"=9", "xpu-e2e-busybox", "true")
		require.NotZero(t, r.ExitCode)
		require.Contains(t, r.Stderr, "unresolvable CDI devices")
	})
}

// TestContainerdCDI runs real containerd 2.x: `ctr run --device` resolves
// the names from the spec xpu-cdi wrote.
func TestContainerdCDI(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	c := harness.NewContainerd(t)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	image := c.ImportImage(t, rootfs, "xpu-e2e-busybox")
	vendor := harness.UniqueVendor(t)
	// ctr resolves --device itself, from /etc/cdi and /var/run/cdi.
	harness.InstallSpec(t, GenerateSpec(t, tree, vendor), vendor)
	kind := vendor + "/xpu"

	for i, tc := range []struct {
		description string
		devices     []string
		want        []int
	}{
		{"one device", []string{"0"}, []int{0}},
		{"0 and 3", []string{"0", "3"}, []int{0, 3}},
		{"by PCI address", []string{tree.Devices[4].BDF}, []int{4}},
		{"all", []string{"all"}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			args := []string{"run", "--rm"}
			for _, d := range tc.devices {
				args = append(args, "--device", kind+"="+d)
			}
			args = append(args, image, fmt.Sprintf("xpu-e2e-%d", i), "sh", "-c", listXPUs+"; xpu-smi >/dev/null && echo smi-ok; ls /usr/local/xpu/lib64")
			r := c.MustCtr(t, args...)
			nodes, env := parseNodes(t, r.Stdout)
			wantNodes, wantEnv := expect(tree, tc.want...)
			require.Equal(t, wantNodes, nodes)
			require.Equal(t, wantEnv, env)
			require.Contains(t, r.Stdout, "smi-ok")
			require.Contains(t, r.Stdout, "libxpurt.so.1")
		})
	}
}
