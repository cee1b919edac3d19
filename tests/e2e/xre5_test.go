package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// xre5Script runs inside the containers of TestXRE5Containers: the xpu
// nodes, the XPU variables, then the three programs a P800 user runs.
const xre5Script = listXPUs + `; echo "== xpu-test"; xpu-test-xre5; echo "== probe"; xpu-cuda-probe; echo "== smi"; xpu-smi`

// xre5Host builds the P800 host with driver and XRE 5.x, plus another
// vendor's libcuda.so.1 in its system library directory, listed in its
// ld.so.cache: the spec must never take it.
func xre5Host(t *testing.T) *fakehost.Tree {
	t.Helper()
	tree := FakeHost(t, fakehost.P800XRE5())
	gcc := harness.RequiresTool(t, "gcc")
	src := filepath.Join(t.TempDir(), "cuda.c")
	require.NoError(t, os.WriteFile(src, []byte("int cuInit(unsigned int f) { (void)f; return 100; }\n"), 0o644))
	decoy := tree.Path(fakehost.SystemLibDir + "/libcuda.so.1")
	out, err := exec.Command(gcc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", decoy, src).CombinedOutput()
	require.NoError(t, err, string(out))
	flags := ldcache.FlagELFLibc6 | ldcache.FlagX8664Lib64
	cache, err := ldcache.Encode([]ldcache.Entry{
		{Name: "libcuda.so.1", Path: fakehost.SystemLibDir + "/libcuda.so.1", Flags: flags},
		{Name: "libxpunvidia-ml.so.1", Path: fakehost.SystemLibDir + "/libxpunvidia-ml.so.1", Flags: flags},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tree.Path(fakehost.LdCachePath), cache, 0o644))
	return tree
}

// xre5Rootfs is a glibc image with xpu-test-xre5 (linked against
// libxpurt.so.2) and xpu-cuda-probe (dlopens libcuda.so.1) in /usr/bin.
func xre5Rootfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	rootfs := filepath.Join(dir, "rootfs")
	harness.BuildGlibcRootfs(t, rootfs)
	cache := fakehost.WithCacheDir(fakehosttest.CacheDir(t))
	require.NoError(t, fakehost.BuildTestProgramXRE5(filepath.Join(rootfs, "usr", "bin", "xpu-test-xre5"), cache))
	require.NoError(t, fakehost.BuildCUDAProbe(filepath.Join(rootfs, "usr", "bin", "xpu-cuda-probe"), cache))
	return rootfs
}

// checkXRE5Container checks what xre5Script printed in a container given
// /dev/xpu<idx>: the node and xpuctrl with the host's major:minor (195:N,
// 195:255), libxpurt.so.2 loaded, libcuda.so.1 loaded from the XRE (the
// very file of the host's XRE, by device and inode), xpu-smi running.
func checkXRE5Container(t *testing.T, tree *fakehost.Tree, out string, idx int) {
	t.Helper()
	nodes, env := parseNodes(t, out)
	require.Equal(t, map[string]string{
		"/dev/xpuctrl":                 "195:255",
		fmt.Sprintf("/dev/xpu%d", idx): fmt.Sprintf("195:%d", idx),
	}, nodes, out)
	require.Equal(t, []string{fmt.Sprintf("XPU_CDI_DEVICE_%d=unknown", idx)}, env, "no PCI address is guessed")

	require.Contains(t, out, "xpu devices: 1\nxpurt version: "+fakehost.XREVersionP800+"\n", "the program linked against libxpurt.so.2 runs")

	var st unix.Stat_t
	require.NoError(t, unix.Stat(tree.Path(tree.XREDir+"/so/libcuda.so.1"), &st))
	require.Contains(t, out, "libcuda.so.1 path: /usr/local/xpu/so/libcuda.so.1\n")
	require.Contains(t, out, fmt.Sprintf("libcuda.so.1 file: %d:%d %d\n", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino),
		"the loaded libcuda.so.1 is the host XRE's file")
	require.Contains(t, out, "libcuda.so.1 origin: kunlun-xre\n")

	require.Contains(t, out, "XPU-SMI 5 (xpu-cdi fake host)")
	require.Contains(t, out, fmt.Sprintf("| %-5d | %-18s | %-13s |", idx, fmt.Sprintf("/dev/xpu%d", idx), fmt.Sprintf("195:%d", idx)))
	require.Contains(t, out, "1 device(s) found")
}

// TestXRE5Containers runs real Podman 4.3.1 and containerd 2.x with the
// spec xpu-cdi generates for a P800 host with driver and XRE 5.x.
func TestXRE5Containers(t *testing.T) {
	tree := xre5Host(t)
	rootfs := xre5Rootfs(t)
	vendor, noHooks := harness.UniqueVendor(t), harness.UniqueVendor(t)
	spec := GenerateSpec(t, tree, vendor)
	specNoHooks := GenerateSpec(t, tree, noHooks, "--no-hooks")
	require.NotContains(t, string(spec), fakehost.SystemLibDir+"/libcuda.so.1",
		"another vendor's libcuda.so.1 in the system directory is never taken")
	require.Contains(t, string(spec), "containerPath: /usr/local/xpu/so/libcuda.so.1\n")
	require.Contains(t, string(spec), "containerPath: "+fakehost.SystemLibDir+"/libxpunvidia-ml.so.1\n")
	require.Contains(t, string(spec), "containerPath: "+fakehost.SystemLibDir+"/libxpunvidia-ml.so."+fakehost.XREVersionP800+"\n")

	info := XPUCDI(t, "info", "--dev-root", tree.Root, "--driver-root", tree.Root)
	require.Contains(t, info, "runtime library: /usr/local/xpu/so/libxpurt.so.2")
	require.NotContains(t, info, "Problems:")

	t.Run("podman", func(t *testing.T) {
		p := harness.NewPodman(t)
		p.ImportImage(t, rootfs, "xpu-e2e-xre5")
		p.InstallSpec(t, spec, vendor)
		p.InstallSpec(t, specNoHooks, noHooks)
		for _, idx := range []int{2, 7} {
			r := p.MustRun(t, "run", "--rm", "--device", fmt.Sprintf("%s/xpu=%d", vendor, idx), "xpu-e2e-xre5", "sh", "-c", xre5Script)
			checkXRE5Container(t, tree, r.Stdout, idx)
		}
		// The driver files are read-only, the development links exist.
		r := p.MustRun(t, "run", "--rm", "--device", vendor+"/xpu=0", "xpu-e2e-xre5", "sh", "-c",
			"readlink /usr/local/xpu/so/libxpurt.so; readlink /usr/local/xpu/so/libcudart.so; touch /usr/local/xpu/so/libxpurt.so.2 2>/dev/null || echo read-only; cat /etc/ld.so.conf.d/00-xpu-cdi.conf")
		require.Contains(t, r.Stdout, "libxpurt.so.2\nlibcudart.so.12\nread-only\n")
		require.Contains(t, r.Stdout, "/usr/local/xpu/so\n")
		// Without the hook, so/ is not in the container's loader cache.
		r = p.Run(t, "run", "--rm", "--device", noHooks+"/xpu=0", "xpu-e2e-xre5", "xpu-test-xre5")
		require.NotZero(t, r.ExitCode, "without the hook libxpurt.so.2 must not load: %s", r)
		require.Contains(t, r.Stdout+r.Stderr, "libxpurt.so.2")
	})

	t.Run("containerd", func(t *testing.T) {
		c := harness.NewContainerd(t)
		ref := c.ImportImage(t, rootfs, "xpu-e2e-xre5")
		harness.InstallSpec(t, spec, vendor)
		for _, idx := range []int{0, 5} {
			r := c.MustCtr(t, "run", "--rm", "--device", fmt.Sprintf("%s/xpu=%d", vendor, idx), ref, fmt.Sprintf("xpu-xre5-%d", idx), "sh", "-c", xre5Script)
			checkXRE5Container(t, tree, r.Stdout, idx)
		}
		r := c.MustCtr(t, "run", "--rm", "--device", vendor+"/xpu=all", ref, "xpu-xre5-all", "sh", "-c", "xpu-smi")
		require.Contains(t, r.Stdout, "8 device(s) found")
		require.True(t, strings.Contains(r.Stdout, "| 7     | /dev/xpu7          | 195:7 "), r.Stdout)
	})
}

// TestP800SysfsPodman runs real Podman 4.3.1 with the spec of the P800 host
// whose nodes reach their PCI functions only through /sys/dev/char (class
// kunlun, no /sys/class/xpu, nodes not in PCI address order): a device asked
// for by PCI address is the node of that function, with its variable, and
// the XRE 5 programs run with it.
func TestP800SysfsPodman(t *testing.T) {
	tree := FakeHost(t, fakehost.P800Sysfs())
	rootfs := xre5Rootfs(t)
	vendor := harness.UniqueVendor(t)
	spec := GenerateSpec(t, tree, vendor)
	require.Contains(t, string(spec), "name: \"0000:01:00.0\"\n")

	info := XPUCDI(t, "info", "--dev-root", tree.Root, "--driver-root", tree.Root)
	require.NotContains(t, info, "Problems:")
	require.NotContains(t, info, "no PCI address")

	p := harness.NewPodman(t)
	p.ImportImage(t, rootfs, "xpu-e2e-p800-sysfs")
	p.InstallSpec(t, spec, vendor)
	for _, tc := range []struct {
		name string
		idx  int
		bdf  string
	}{
		{name: "0000:01:00.0", idx: 3, bdf: "0000:01:00.0"},
		{name: "0000:82:00.0", idx: 0, bdf: "0000:82:00.0"},
		{name: "0", idx: 0, bdf: "0000:82:00.0"},
	} {
		r := p.MustRun(t, "run", "--rm", "--device", vendor+"/xpu="+tc.name, "xpu-e2e-p800-sysfs", "sh", "-c", xre5Script)
		nodes, env := parseNodes(t, r.Stdout)
		require.Equal(t, map[string]string{
			"/dev/xpuctrl":                    "195:255",
			fmt.Sprintf("/dev/xpu%d", tc.idx): fmt.Sprintf("195:%d", tc.idx),
		}, nodes, "%s: %s", tc.name, r.Stdout)
		require.Equal(t, []string{fmt.Sprintf("XPU_CDI_DEVICE_%d=%s", tc.idx, tc.bdf)}, env, tc.name)
		require.Contains(t, r.Stdout, "xpu devices: 1\n", tc.name)
		require.Contains(t, r.Stdout, "1 device(s) found", tc.name)
	}
}
