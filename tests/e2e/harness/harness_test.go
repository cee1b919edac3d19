package harness

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
)

func TestUniqueVendor(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		v := UniqueVendor(t)
		require.NoError(t, parser.ValidateVendorName(v))
		require.True(t, strings.HasSuffix(v, TestVendorDomain), v)
		require.False(t, seen[v], "duplicate vendor %s", v)
		seen[v] = true
		// Usable in a qualified device name.
		vendor, class, name, err := parser.ParseQualifiedName(v + "/e2e=0")
		require.NoError(t, err)
		require.Equal(t, []string{v, "e2e", "0"}, []string{vendor, class, name})
	}
}

func TestCheckTestVendor(t *testing.T) {
	for _, tc := range []struct {
		vendor string
		ok     bool
	}{
		{"e2e-0011aabb.xpu-cdi.test", true},
		{"baidu.com", false},
		{"nvidia.com", false},
		{"xpu-cdi.test", false},          // the domain itself is not a test vendor
		{"evil.xpu-cdi.test.com", false}, // suffix, not substring
		{"../etc.xpu-cdi.test", false},   // not a valid vendor name
		{"", false},
	} {
		t.Run(tc.vendor, func(t *testing.T) {
			err := checkTestVendor(tc.vendor)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}

func TestWriteSpecRefusesRealVendor(t *testing.T) {
	dir := t.TempDir()
	ft := testutil.Call(t, func(tb testing.TB) { WriteSpec(tb, dir, []byte("cdiVersion: 0.5.0\n"), "baidu.com") })
	require.True(t, ft.DidFail, "writing a baidu.com spec must fail the test")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestWriteSpecRemovedAtCleanup(t *testing.T) {
	dir := t.TempDir()
	vendor := UniqueVendor(t)
	var path string
	t.Run("writer", func(t *testing.T) {
		path = WriteSpec(t, dir, []byte("cdiVersion: 0.5.0\n"), vendor)
		require.Equal(t, filepath.Join(dir, vendor+"-xpu.yaml"), path)
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	})
	require.NoFileExists(t, path)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no temporary file left behind")
}

func TestNormalizeImageRef(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"busybox", "docker.io/library/busybox:latest"},
		{"busybox:1", "docker.io/library/busybox:1"},
		{"me/busybox", "docker.io/me/busybox:latest"},
		{"localhost/busybox", "localhost/busybox:latest"},
		{"example.com:5000/a/b", "example.com:5000/a/b:latest"},
		{"example.com/a/b:v2", "example.com/a/b:v2"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, tc.want, NormalizeImageRef(tc.in))
		})
	}
}

func TestBusyboxRootfs(t *testing.T) {
	RequiresTool(t, HostBusybox)
	dir := t.TempDir()
	BuildBusyboxRootfs(t, dir)
	for _, f := range []string{"bin/busybox", "bin/sh", "etc/passwd", "etc/group"} {
		require.FileExists(t, filepath.Join(dir, f))
	}
	target, err := os.Readlink(filepath.Join(dir, "bin/sh"))
	require.NoError(t, err)
	require.Equal(t, "/bin/busybox", target)
	fi, err := os.Stat(filepath.Join(dir, "tmp"))
	require.NoError(t, err)
	require.Equal(t, os.ModeSticky|0o777, fi.Mode()&(os.ModeSticky|os.ModePerm))
	require.NoFileExists(t, filepath.Join(dir, "sbin/ldconfig"))

	archive := filepath.Join(t.TempDir(), "image.tar")
	WriteOCIArchive(t, dir, "docker.io/library/x:latest", archive)
	require.FileExists(t, archive)
}

func TestCRIConfigs(t *testing.T) {
	podPath, ctrPath := criConfigs(t, CRIContainer{
		Name: "e2e-x", Image: "docker.io/library/x:latest", Command: []string{"sh", "-c", "true"},
		Env:             map[string]string{"A": "1"},
		CDIDevices:      []string{"v.xpu-cdi.test/xpu=0", "v.xpu-cdi.test/xpu=3"},
		Annotations:     map[string]string{"cdi.k8s.io/e2e": "v.xpu-cdi.test/xpu=1"},
		AddCapabilities: []string{"SYS_ADMIN"},
		PodAnnotations:  map[string]string{"cdi.k8s.io/pod": "v.xpu-cdi.test/xpu=all"},
		Mounts:          []CRIMount{{ContainerPath: "/var/run/xpu-container-devices/2", HostPath: "/dev/null", ReadOnly: true}},
	}, "/xe2e-crio-0011aabb")
	var pod, ctr map[string]any
	for path, v := range map[string]*map[string]any{podPath: &pod, ctrPath: &ctr} {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, v))
	}
	hostNetPIDContainer := map[string]any{"network": float64(2), "pid": float64(1)}
	require.Equal(t, "e2e-x", pod["metadata"].(map[string]any)["name"])
	require.DirExists(t, pod["log_directory"].(string))
	require.Equal(t, hostNetPIDContainer, pod["linux"].(map[string]any)["security_context"].(map[string]any)["namespace_options"])
	require.Equal(t, "/xe2e-crio-0011aabb", pod["linux"].(map[string]any)["cgroup_parent"])
	require.Equal(t, []any{map[string]any{"name": "v.xpu-cdi.test/xpu=0"}, map[string]any{"name": "v.xpu-cdi.test/xpu=3"}}, ctr["CDI_devices"])
	require.Equal(t, map[string]any{"cdi.k8s.io/e2e": "v.xpu-cdi.test/xpu=1"}, ctr["annotations"])
	require.Equal(t, map[string]any{"cdi.k8s.io/pod": "v.xpu-cdi.test/xpu=all"}, pod["annotations"])
	require.Equal(t, []any{map[string]any{"container_path": "/var/run/xpu-container-devices/2", "host_path": "/dev/null", "readonly": true}}, ctr["mounts"])
	require.Equal(t, []any{map[string]any{"key": "A", "value": "1"}}, ctr["envs"])
	sc := ctr["linux"].(map[string]any)["security_context"].(map[string]any)
	require.Equal(t, hostNetPIDContainer, sc["namespace_options"])
	require.Equal(t, []any{"SYS_ADMIN"}, sc["capabilities"].(map[string]any)["add_capabilities"])
}

func TestRemoveCgroupTreeRefusesRoot(t *testing.T) {
	for _, p := range []string{"", "/", "relative"} {
		require.Error(t, removeCgroupTree(p), p)
	}
}

// TestRemoveCgroupTreeKillsWhatIsLeft: a process left in a test's cgroup
// tree (a container whose shim was killed) is killed and the tree removed.
func TestRemoveCgroupTreeKillsWhatIsLeft(t *testing.T) {
	RequiresRoot(t)
	parent := "/" + filepath.Base(t.TempDir())
	require.NoError(t, createCgroup(parent))
	procs, err := filepath.Glob(filepath.Join(cgroupRoot, "*", strings.TrimPrefix(parent, "/"), "cgroup.procs"))
	require.NoError(t, err)
	if len(procs) == 0 {
		procs = []string{filepath.Join(cgroupRoot, parent, "cgroup.procs")}
	}
	sleep := exec.Command("sleep", "600")
	require.NoError(t, sleep.Start())
	exited := make(chan error, 1)
	go func() { exited <- sleep.Wait() }()
	t.Cleanup(func() { _ = sleep.Process.Kill() })
	require.NoError(t, os.WriteFile(procs[0], []byte(strconv.Itoa(sleep.Process.Pid)), 0o644))

	require.NoError(t, removeCgroupTree(parent))
	select {
	case err := <-exited:
		require.ErrorContains(t, err, "killed")
	case <-time.After(5 * time.Second):
		t.Fatal("the process left in the cgroup still runs")
	}
	for _, p := range procs {
		require.NoDirExists(t, filepath.Dir(p))
	}
}

func TestRootShared(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, mountinfo string
		shared          bool
		err             string
	}{
		{"shared", "22 27 0:21 / /proc rw - proc proc rw\n27 1 0:30 / / rw,relatime shared:1 - overlay overlay rw\n", true, ""},
		{"private", "22 27 0:21 / /proc rw shared:4 - proc proc rw\n27 1 0:30 / / rw,relatime - overlay overlay rw\n", false, ""},
		{"slave only", "27 1 0:30 / / rw,relatime master:3 - overlay overlay rw\n", false, ""},
		{"stacked, the top one private", "27 1 0:30 / / rw shared:1 - overlay overlay rw\n40 27 0:31 / / rw - tmpfs tmpfs rw\n", false, ""},
		{"a field after the separator is not optional", "27 1 0:30 / / rw - overlay shared:1 rw\n", false, ""},
		{"no root", "22 27 0:21 / /proc rw shared:4 - proc proc rw\n", false, "has no mount on /"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			require.NoError(t, os.WriteFile(path, []byte(tc.mountinfo), 0o644))
			shared, err := rootShared(path)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, path)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.shared, shared)
		})
	}
	_, err := rootShared(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// The namespace is another one with / shared; this process's / keeps its
// propagation.
func TestSharedMountNamespace(t *testing.T) {
	RequiresRoot(t)
	before, err := rootShared("/proc/self/mountinfo")
	require.NoError(t, err)
	ns := sharedMountNamespace(t)
	self, err := os.Readlink("/proc/self/ns/mnt")
	require.NoError(t, err)
	other, err := os.Readlink(ns)
	require.NoError(t, err)
	require.NotEqual(t, self, other)
	shared, err := rootShared(filepath.Join(filepath.Dir(filepath.Dir(ns)), "mountinfo"))
	require.NoError(t, err)
	require.True(t, shared)
	// Other tests mount on this host meanwhile: only / is compared.
	after, err := rootShared("/proc/self/mountinfo")
	require.NoError(t, err)
	require.Equal(t, before, after)
}
