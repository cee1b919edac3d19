package shim

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/config"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/xpurequest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// fakeHost builds a fake host with plain files for nodes (so the test does
// not depend on root) and returns the tree and the discovery seam for it;
// the roots come from the shim's configuration.
func fakeHost(t *testing.T, h fakehost.Host) (*fakehost.Tree, Settings) {
	t.Helper()
	tree := fakehosttest.Build(t, h, fakehost.WithoutMknod())
	return tree, Settings{discoverOpts: []discover.Option{discover.WithNodeStater(tree.NodeStater())}}
}

// logTo is s logging to log.
func (s Settings) logTo(log logger.Interface) Settings {
	s.Log = log
	return s
}

// configError is s with the configuration error err of the file path.
func (s Settings) configError(path string, err error) Settings {
	s.ConfigPath, s.ConfigErr = path, err
	return s
}

func jitConfig(root string) *config.Config {
	c := config.Default()
	c.Mode = config.ModeJIT
	c.DevRoot, c.DriverRoot = root, root
	c.SpecDirs = []string{"/nonexistent-xpu-cdi-test"}
	c.CacheDir = ""
	return c
}

// bundleSpec is a minimal OCI spec, indented (unlike the shim's output) so
// that an unchanged file is recognisable byte for byte. Privileged is what
// engines write for --privileged: an allow-all device rule after runc's
// deny-all; the unprivileged spec holds CAP_SYS_ADMIN, which is no
// privilege to the shim.
func bundleSpec(privileged bool, annotations map[string]string, env ...string) *oci.Spec {
	caps := []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_SYS_ADMIN"}
	rules := []oci.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}
	if privileged {
		rules = append(rules, oci.LinuxDeviceCgroup{Allow: true, Access: "rwm"})
	}
	return &oci.Spec{
		Version: oci.Version,
		Process: &oci.Process{
			Args:         []string{"sh"},
			Cwd:          "/",
			Env:          append([]string{"PATH=/usr/bin:/bin"}, env...),
			Capabilities: &oci.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
		},
		Root:        &oci.Root{Path: "rootfs"},
		Annotations: annotations,
		Linux:       &oci.Linux{Resources: &oci.LinuxResources{Devices: rules}},
	}
}

// withMounts adds the device plugin's volume-mounts answer for ids and
// returns s.
func withMounts(s *oci.Spec, source string, ids ...string) *oci.Spec {
	for _, id := range ids {
		s.Mounts = append(s.Mounts, oci.Mount{
			Destination: xpurequest.MountDir + "/" + id, Source: source, Type: "bind", Options: []string{"rbind", "ro"},
		})
	}
	return s
}

// crio marks s as written by CRI-O, with the container's own annotations
// in io.kubernetes.cri-o.Annotations, and returns it.
func crio(s *oci.Spec, own string) *oci.Spec {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations["io.kubernetes.cri-o.Annotations"] = own
	s.Annotations["io.container.manager"] = "cri-o"
	return s
}

// cri marks s as written by containerd's CRI and returns it.
func cri(s *oci.Spec) *oci.Spec {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations["io.kubernetes.cri.container-type"] = "container"
	return s
}

func writeBundle(t *testing.T, spec *oci.Spec) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	data, err := json.MarshalIndent(spec, "", "\t")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(ConfigPath(dir), data, 0o600))
	return dir, data
}

func readBundle(t *testing.T, dir string) *oci.Spec {
	t.Helper()
	data, err := os.ReadFile(ConfigPath(dir))
	require.NoError(t, err)
	var s oci.Spec
	require.NoError(t, json.Unmarshal(data, &s))
	return &s
}

func envValues(env []string, key string) []string {
	var out []string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, key+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func devicePaths(s *oci.Spec) []string {
	var out []string
	if s.Linux != nil {
		for _, d := range s.Linux.Devices {
			out = append(out, d.Path)
		}
	}
	return out
}

func TestModifyBundle(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	host, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	addr3 := host.Device(3).Address()
	serial5 := host.Device(5).Serial
	require.NotEmpty(t, addr3)
	require.NotEmpty(t, serial5)
	ann := func(v string) map[string]string { return map[string]string{"cdi.k8s.io/test_0": v} }

	tests := []struct {
		description string
		spec        *oci.Spec
		config      func(*config.Config)
		want        []int
		wantNodes   []string
	}{
		{
			description: "privileged env indices", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=0,3"), want: []int{0, 3},
			wantNodes: []string{"/dev/xpuctrl", "/dev/xpu0", "/dev/xpu3"},
		},
		{description: "unsorted and repeated", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=7, 2,7"), want: []int{2, 7}},
		{description: "PCI address and serial", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES="+addr3+","+serial5), want: []int{3, 5}},
		{description: "qualified name in env", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=baidu.com/xpu=1"), want: []int{1}},
		{description: "all", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=all"), want: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{description: "last env entry wins", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=1", "XPU_VISIBLE_DEVICES=2"), want: []int{2}},
		{description: "annotation from an unprivileged container", spec: bundleSpec(false, ann("baidu.com/xpu=4,baidu.com/xpu="+addr3)), want: []int{3, 4}},
		{description: "annotation and env combined", spec: bundleSpec(true, ann("baidu.com/xpu=6"), "XPU_VISIBLE_DEVICES=0"), want: []int{0, 6}},
		{description: "unprivileged env ignored beside annotations", spec: bundleSpec(false, ann("baidu.com/xpu=6"), "XPU_VISIBLE_DEVICES=all"), want: []int{6}},
		{
			description: "unprivileged env accepted when configured", spec: bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=5"),
			config: func(c *config.Config) { c.AcceptEnvvarWhenUnprivileged = true }, want: []int{5},
		},
		{description: "other kinds are left alone", spec: bundleSpec(false, map[string]string{"cdi.k8s.io/a": "nvidia.com/gpu=0", "cdi.k8s.io/b": "baidu.com/xpu=2"}), want: []int{2}},
		{description: "device plugin mounts", spec: withMounts(bundleSpec(false, nil), "/dev/null", "1", "4"), want: []int{1, 4}},
		{
			description: "device plugin mounts beat the pod's variable on CRI-O", want: []int{2},
			spec:   crio(withMounts(bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=all"), "/dev/null", "2"), "{}"),
			config: func(c *config.Config) { c.AcceptDevicePluginMounts = true },
		},
		{
			description: "device plugin mounts beat the pod's variable on containerd's CRI, even when accepted", want: []int{5},
			spec:   cri(withMounts(bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=all"), "/dev/null", "5")),
			config: func(c *config.Config) { c.AcceptEnvvarWhenUnprivileged, c.AcceptDevicePluginMounts = true, true },
		},
		{
			description: "annotated for XPU 0, the image asks for all", want: []int{0},
			spec: bundleSpec(false, ann("baidu.com/xpu=0"), "XPU_VISIBLE_DEVICES=all"),
		},
		{
			description: "device rule a *:* rwm is privileged", want: []int{0, 1},
			spec: func() *oci.Spec {
				s := bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=0,1")
				all := int64(-1)
				s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, oci.LinuxDeviceCgroup{Allow: true, Type: "a", Major: &all, Minor: &all, Access: "rwm"})
				return s
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			c := jitConfig(tree.Root)
			if tc.config != nil {
				tc.config(c)
			}
			dir, _ := writeBundle(t, tc.spec)
			res, err := ModifyBundle(dir, c, seam)
			require.NoError(t, err)
			require.True(t, res.Modified)
			require.Equal(t, config.ModeJIT, res.Mode)
			require.Equal(t, tc.want, res.Devices)

			got := readBundle(t, dir)
			require.Equal(t, []string{discover.JoinIndices(tc.want)}, envValues(got.Process.Env, xpurequest.VisibleDevicesEnv))
			var wantNodes []string
			if tc.wantNodes != nil {
				wantNodes = tc.wantNodes
			} else {
				wantNodes = []string{"/dev/xpuctrl"}
				for _, i := range tc.want {
					wantNodes = append(wantNodes, "/dev/xpu"+itoa(i))
				}
			}
			require.ElementsMatch(t, wantNodes, devicePaths(got))
			// Driver libraries and the hook are there once.
			require.NotEmpty(t, got.Mounts)
			require.NotNil(t, got.Hooks)
			require.Len(t, got.Hooks.CreateContainer, 1)
			require.Equal(t, "setup-libraries", got.Hooks.CreateContainer[0].Args[1])
			st, err := os.Stat(ConfigPath(dir))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "mode kept")
		})
	}
}

func itoa(i int) string { return discover.JoinIndices([]int{i}) }

func TestModifyBundleNothingAsked(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	for _, tc := range []struct {
		description string
		spec        *oci.Spec
	}{
		{description: "no variable", spec: bundleSpec(false, nil)},
		{description: "none", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=none")},
		{description: "void", spec: bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=void")},
		{description: "NONE", spec: bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=NONE")},
		{description: "Void", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES= Void ")},
		{description: "empty", spec: bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=")},
		{description: "only other kinds", spec: bundleSpec(false, map[string]string{"cdi.k8s.io/x": "nvidia.com/gpu=all"})},
		{description: "other annotations", spec: bundleSpec(false, map[string]string{"io.kubernetes.pod": "x"})},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir, before := writeBundle(t, tc.spec)
			c := jitConfig(tree.Root)
			// Even a broken configuration does not matter here.
			res, err := ModifyBundle(dir, c, seam.configError("/etc/x.toml", os.ErrPermission))
			require.NoError(t, err)
			require.False(t, res.Modified)
			after, err := os.ReadFile(ConfigPath(dir))
			require.NoError(t, err)
			require.Equal(t, before, after)
		})
	}
}

// TestModifyBundleIgnoresRefusedEnv: an unprivileged container whose image
// sets XPU_VISIBLE_DEVICES starts without XPUs, its bundle untouched, and
// the shim says why.
func TestModifyBundleIgnoresRefusedEnv(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	for _, env := range []string{"XPU_VISIBLE_DEVICES=0,3", "XPU_VISIBLE_DEVICES=ALL", "XPU_VISIBLE_DEVICES=all"} {
		t.Run(env, func(t *testing.T) {
			dir, before := writeBundle(t, bundleSpec(false, nil, env))
			log := &logtest.Recorder{}
			res, err := ModifyBundle(dir, jitConfig(tree.Root), seam.logTo(log).configError("/etc/test-config.toml", nil))
			require.NoError(t, err)
			require.False(t, res.Modified)
			after, err := os.ReadFile(ConfigPath(dir))
			require.NoError(t, err)
			require.Equal(t, before, after)
			require.True(t, log.Has("it starts without XPUs"), log.Lines())
			require.True(t, log.Has("fail-on-refused-envvar = true"), log.Lines())
		})
	}
}

func TestModifyBundleErrorsLeaveConfigUnchanged(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	tests := []struct {
		description string
		spec        *oci.Spec
		raw         []byte
		config      func(*config.Config)
		configPath  string
		configErr   error
		wantIs      error
		wantErr     []string
	}{
		{
			description: "unknown index", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=0,9"), wantIs: errUnknownDevice,
			wantErr: []string{"unknown XPU device baidu.com/xpu=9", "XPU_VISIBLE_DEVICES=0,9", "valid names of baidu.com/xpu (jit mode): 0, 1, 2, 3, 4, 5, 6, 7, 0000:01:00.0", "all"},
		},
		{
			description: "unknown annotated name", spec: bundleSpec(false, map[string]string{"cdi.k8s.io/t": "baidu.com/xpu=gpu0"}), wantIs: errUnknownDevice,
			wantErr: []string{"baidu.com/xpu=gpu0", "cdi.k8s.io annotations"},
		},
		{description: "malformed env entry", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=0,-x"), wantErr: []string{`"-x" is not a valid device name`}},
		{description: "env name of another kind", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=nvidia.com/gpu=0"), wantErr: []string{`"nvidia.com/gpu=0" is not a device of kind baidu.com/xpu`}},
		{description: "bad qualified name", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=baidu.com/=0"), wantErr: []string{"not a valid qualified CDI device name"}},
		{
			description: "unprivileged env refused with fail-on-refused-envvar", spec: bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=0,3"), wantIs: errUnprivilegedEnv,
			config:     func(c *config.Config) { c.FailOnRefusedEnvvar = true },
			wantErr:    []string{"is not privileged (its device cgroup rules do not allow every device", "accept-envvar-when-unprivileged = true in /etc/test-config.toml", "fail-on-refused-envvar = false"},
			configPath: "/etc/test-config.toml",
		},
		{
			// What a pod makes with a hostPath volume of a link to /dev/null
			// (containerd resolves the link): docs/security.md, "A hostPath
			// symlink to /dev/null at /var/run/xpu-container-devices/all".
			description: "device plugin mounts of a pod on containerd's CRI, not accepted", wantIs: errPodMounts,
			spec:       cri(withMounts(bundleSpec(false, nil), "/dev/null", "all")),
			wantErr:    []string{"/var/run/xpu-container-devices/ (baidu.com/xpu=all)", "accept-device-plugin-mounts = true in /etc/test-config.toml"},
			configPath: "/etc/test-config.toml",
		},
		{
			description: "device plugin mounts of a pod on CRI-O beside an annotation, not accepted", wantIs: errPodMounts,
			spec:    crio(withMounts(bundleSpec(false, map[string]string{"cdi.k8s.io/t": "baidu.com/xpu=1"}), "/dev/null", "0"), "{}"),
			wantErr: []string{"(baidu.com/xpu=0)"},
		},
		{description: "bad annotation", spec: bundleSpec(false, map[string]string{"cdi.k8s.io/t": "xpu0"}), wantErr: []string{"cdi.k8s.io annotations"}},
		{description: "malformed config.json", raw: []byte(`{"process": {"env": ["XPU_VISIBLE_DEVICES=0"]`), wantErr: []string{"parsing the bundle's OCI spec", "config.json"}},
		{
			description: "config error with a request", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=0"), wantIs: errConfig,
			configPath: "/etc/x.toml", configErr: os.ErrPermission, wantErr: []string{"asks for XPUs (XPU_VISIBLE_DEVICES=0)", "permission denied"},
		},
		{
			description: "cdi mode without a spec", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=0"), config: func(c *config.Config) { c.Mode = config.ModeCDI },
			wantErr: []string{"mode cdi: no CDI spec of baidu.com/xpu in /nonexistent-xpu-cdi-test", "xpu-cdi generate"},
		},
		{
			description: "jit mode without XPUs", spec: bundleSpec(true, nil, "XPU_VISIBLE_DEVICES=0"), config: func(c *config.Config) { c.DevRoot = t.TempDir() },
			wantIs: discover.ErrNoDevices, wantErr: []string{"discovering the XPUs of the host"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			var dir string
			var before []byte
			if tc.raw != nil {
				dir, before = t.TempDir(), tc.raw
				require.NoError(t, os.WriteFile(ConfigPath(dir), before, 0o644))
			} else {
				dir, before = writeBundle(t, tc.spec)
			}
			c := jitConfig(tree.Root)
			if tc.config != nil {
				tc.config(c)
			}
			res, err := ModifyBundle(dir, c, seam.configError(tc.configPath, tc.configErr))
			require.Error(t, err)
			if tc.wantIs != nil {
				require.ErrorIs(t, err, tc.wantIs)
			}
			for _, w := range tc.wantErr {
				require.ErrorContains(t, err, w)
			}
			require.False(t, res.Modified)
			after, err := os.ReadFile(ConfigPath(dir))
			require.NoError(t, err)
			require.Equal(t, before, after, "config.json changed")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary file left")
		})
	}

	t.Run("missing config.json", func(t *testing.T) {
		_, err := ModifyBundle(t.TempDir(), jitConfig(tree.Root), seam)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorContains(t, err, "config.json")
	})
}

func TestEnvNames(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{in: "", want: nil},
		{in: " none ", want: nil},
		{in: "void", want: nil},
		{in: "all", want: []string{"k.io/x=all"}},
		{in: "ALL", want: []string{"k.io/x=all"}},
		{in: "NONE", want: nil},
		{in: " VOID", want: nil},
		{in: "0, 1,,0000:01:00.0", want: []string{"k.io/x=0", "k.io/x=1", "k.io/x=0000:01:00.0"}},
		{in: "k.io/x=3", want: []string{"k.io/x=3"}},
		{in: "none,0", want: []string{"k.io/x=none", "k.io/x=0"}},
		{in: "a b", err: true},
		{in: "o.io/x=3", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := envNames(tc.in, "k.io/x")
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestPrivileged(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	denyAll := oci.LinuxDeviceCgroup{Allow: false, Access: "rwm"}
	allowAll := oci.LinuxDeviceCgroup{Allow: true, Access: "rwm"}
	for _, tc := range []struct {
		description string
		rules       []oci.LinuxDeviceCgroup
		want        bool
	}{
		{description: "no rules", rules: nil},
		{description: "runc's default: deny all", rules: []oci.LinuxDeviceCgroup{denyAll}},
		{description: "--privileged: allow all after deny all", rules: []oci.LinuxDeviceCgroup{denyAll, allowAll}, want: true},
		{description: "allow all of type a, -1 wildcards", rules: []oci.LinuxDeviceCgroup{denyAll, {Allow: true, Type: "a", Major: i(-1), Minor: i(-1), Access: "rwm"}}, want: true},
		{description: "allow all char devices only", rules: []oci.LinuxDeviceCgroup{denyAll, {Allow: true, Type: "c", Access: "rwm"}}},
		{description: "allow all of major 0", rules: []oci.LinuxDeviceCgroup{denyAll, {Allow: true, Major: i(0), Access: "rwm"}}},
		{description: "allow all read-only", rules: []oci.LinuxDeviceCgroup{denyAll, {Allow: true, Access: "r"}}},
		{description: "a deny after allow all", rules: []oci.LinuxDeviceCgroup{allowAll, {Allow: false, Type: "c", Major: i(511), Minor: i(0), Access: "rwm"}}},
		{description: "a partial allow after allow all", rules: []oci.LinuxDeviceCgroup{allowAll, {Allow: true, Type: "c", Major: i(1), Minor: i(3), Access: "rwm"}}, want: true},
	} {
		t.Run(tc.description, func(t *testing.T) {
			s := bundleSpec(false, nil)
			s.Linux.Resources.Devices = tc.rules
			require.Equal(t, tc.want, Privileged(s))
		})
	}
	require.False(t, Privileged(&oci.Spec{}))
	require.False(t, Privileged(&oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}))
	require.False(t, Privileged(bundleSpec(false, nil)), "CAP_SYS_ADMIN in every set is no privilege")
}

// TestModifyBundlePodAnnotationsOnCRIO: CRI-O copies a pod's annotations
// into every container's spec and injects the container's own cdi.k8s.io
// devices itself, so on CRI-O no annotation is a grant: the bundle is
// left as it is and the shim says why.
func TestModifyBundlePodAnnotationsOnCRIO(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	for _, tc := range []struct {
		description string
		spec        *oci.Spec
	}{
		{description: "a pod annotation", spec: crio(bundleSpec(false, map[string]string{"cdi.k8s.io/x": "baidu.com/xpu=all"}), `{"io.kubernetes.container.hash":"1"}`)},
		{description: "a container annotation (CRI-O injected it)", spec: crio(bundleSpec(false, map[string]string{"cdi.k8s.io/xpu-device-plugin_xpu": "baidu.com/xpu=3"}), `{"cdi.k8s.io/xpu-device-plugin_xpu":"baidu.com/xpu=3"}`)},
		{description: "a malformed one", spec: crio(bundleSpec(false, map[string]string{"cdi.k8s.io/x": "not a name"}), "{}")},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir, before := writeBundle(t, tc.spec)
			log := &logtest.Recorder{}
			res, err := ModifyBundle(dir, jitConfig(tree.Root), seam.logTo(log))
			require.NoError(t, err)
			require.False(t, res.Modified)
			after, err := os.ReadFile(ConfigPath(dir))
			require.NoError(t, err)
			require.Equal(t, before, after)
			if tc.description != "a malformed one" {
				require.True(t, log.Has("not granting from the annotations cdi.k8s.io/"), log.Lines())
			}
		})
	}
}

// TestModifyBundlePodmanIsNotCRIO: Podman writes io.kubernetes.cri-o.*
// keys too, but its own manager: its annotations are grants.
func TestModifyBundlePodmanIsNotCRIO(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	dir, _ := writeBundle(t, bundleSpec(false, map[string]string{
		"io.container.manager": "libpod", "io.kubernetes.cri-o.TTY": "false", "io.kubernetes.cri-o.Created": "x",
		"cdi.k8s.io/e2e": "baidu.com/xpu=2",
	}))
	res, err := ModifyBundle(dir, jitConfig(tree.Root), seam)
	require.NoError(t, err)
	require.Equal(t, []int{2}, res.Devices)
}

// TestModifyBundleRefusesForgedMounts: only a bind mount of /dev/null at
// the device plugin's directory is a grant; a pod's own volume there (an
// emptyDir, a hostPath other than /dev/null) is not.
func TestModifyBundleRefusesForgedMounts(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	for _, tc := range []struct {
		description string
		spec        *oci.Spec
	}{
		{description: "emptyDir", spec: withMounts(bundleSpec(false, nil), "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/x", "all")},
		{description: "another host file", spec: withMounts(bundleSpec(false, nil), "/dev/zero", "0")},
		{description: "below a device name", spec: withMounts(bundleSpec(false, nil), "/dev/null", "0/x")},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir, before := writeBundle(t, tc.spec)
			res, err := ModifyBundle(dir, jitConfig(tree.Root), seam)
			require.NoError(t, err)
			require.False(t, res.Modified)
			after, err := os.ReadFile(ConfigPath(dir))
			require.NoError(t, err)
			require.Equal(t, before, after)
		})
	}
}

// TestModifyBundleUnprivilegedEnvOnCRI: on a Kubernetes node the pod author
// sets the environment, so accept-envvar-when-unprivileged does not apply
// to a spec from a CRI.
func TestModifyBundleUnprivilegedEnvOnCRI(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	for _, spec := range []*oci.Spec{
		cri(bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=all")),
		crio(bundleSpec(false, nil, "XPU_VISIBLE_DEVICES=all"), "{}"),
	} {
		dir, before := writeBundle(t, spec)
		c := jitConfig(tree.Root)
		c.AcceptEnvvarWhenUnprivileged = true
		c.FailOnRefusedEnvvar = true
		_, err := ModifyBundle(dir, c, seam)
		require.ErrorIs(t, err, errUnprivilegedEnv)
		require.ErrorContains(t, err, "on a Kubernetes node")
		after, err := os.ReadFile(ConfigPath(dir))
		require.NoError(t, err)
		require.Equal(t, before, after)
	}
}

// TestModifyBundleBoundsItsInput: a FIFO config.json is refused at once, an
// oversized one with the bound, and a huge refused variable is quoted
// truncated.
func TestModifyBundleBoundsItsInput(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.P800x8())
	dir := t.TempDir()
	require.NoError(t, unix.Mkfifo(ConfigPath(dir), 0o600))
	_, err := ModifyBundle(dir, jitConfig(tree.Root), seam)
	require.ErrorIs(t, err, fdio.ErrNotRegular)
	require.ErrorContains(t, err, ConfigPath(dir))

	dir = t.TempDir()
	require.NoError(t, os.WriteFile(ConfigPath(dir), make([]byte, MaxConfigSize+1), 0o600))
	_, err = ModifyBundle(dir, jitConfig(tree.Root), seam)
	require.ErrorIs(t, err, fdio.ErrTooLarge)

	huge := strings.Repeat("9", 800<<10)
	dir, _ = writeBundle(t, bundleSpec(false, nil, "XPU_VISIBLE_DEVICES="+huge))
	log := &logtest.Recorder{}
	_, err = ModifyBundle(dir, jitConfig(tree.Root), seam.logTo(log))
	require.NoError(t, err)
	for _, l := range log.Lines() {
		require.Less(t, len(l), 4096, "a log line quotes the variable whole")
	}
	require.True(t, log.Has("more bytes)"), log.Lines())
}

func TestSetEnv(t *testing.T) {
	p := &oci.Process{Env: []string{"A=1", "XPU_VISIBLE_DEVICES=all", "B=2", "XPU_VISIBLE_DEVICES=9"}}
	setVisibleDevices(p, []int{0, 3})
	require.Equal(t, []string{"A=1", "XPU_VISIBLE_DEVICES=0,3", "B=2"}, p.Env)
	p = &oci.Process{Env: []string{"XPU_VISIBLE_DEVICES_X=1"}}
	setVisibleDevices(p, []int{1})
	require.Equal(t, []string{"XPU_VISIBLE_DEVICES_X=1", "XPU_VISIBLE_DEVICES=1"}, p.Env)
}

func TestMayRequest(t *testing.T) {
	require.False(t, mayRequest([]byte(`{"process":{"env":["PATH=/bin"]}}`)))
	require.True(t, mayRequest([]byte(`{"process":{"env":["XPU_VISIBLE_DEVICES=0"]}}`)))
	require.True(t, mayRequest([]byte(`{"annotations":{"cdi.k8s.io/x":"a/b=c"}}`)))
	require.True(t, mayRequest([]byte(`{"mounts":[{"destination":"/var/run/xpu-container-devices/0","source":"/dev/null"}]}`)))
	require.True(t, mayRequest([]byte(`{"process":{"env":["\u0058PU_VISIBLE_DEVICES=0"]}}`)), "escapes force a full parse")
}
