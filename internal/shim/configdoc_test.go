package shim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
)

// testEdits touch every member ContainerEdits.Apply changes.
func testEdits() *cdiapi.ContainerEdits {
	major, minor := int64(243), int64(0)
	return &cdiapi.ContainerEdits{ContainerEdits: &specs.ContainerEdits{
		Env:         []string{"XPU_CDI_DEVICE_0=0000:3b:00.0", "PATH=/replaced"},
		DeviceNodes: []*specs.DeviceNode{{Path: "/dev/xpu0", Type: "c", Major: major, Minor: minor}, {Path: "/dev/xpuctrl", Type: "c", Major: major, Minor: 255}},
		Mounts: []*specs.Mount{
			{HostPath: "/usr/local/xpu/lib64/libxpurt.so.1", ContainerPath: "/usr/local/xpu/lib64/libxpurt.so.1", Options: []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}},
			{HostPath: "/tmp", ContainerPath: "/tmp", Options: []string{"rbind"}},
		},
		Hooks: []*specs.Hook{
			{HookName: "createContainer", Path: "/usr/bin/xpu-runtime-hook", Args: []string{"xpu-runtime-hook", "update-ldcache"}, Env: []string{"PATH=/usr/bin"}},
			{HookName: "poststop", Path: "/usr/bin/true"},
		},
		AdditionalGIDs: []uint32{44},
		IntelRdt:       &specs.IntelRdt{ClosID: "xpu"},
		NetDevices:     []*specs.LinuxNetDevice{{HostInterfaceName: "xpunet0", Name: "eth9"}},
	}}
}

// singleEdits splits testEdits into one edit of each kind, so that each
// kind alone is checked to change no member but its own.
func singleEdits() []*cdiapi.ContainerEdits {
	all := testEdits().ContainerEdits
	one := func(f func(e *specs.ContainerEdits)) *cdiapi.ContainerEdits {
		e := &specs.ContainerEdits{}
		f(e)
		return &cdiapi.ContainerEdits{ContainerEdits: e}
	}
	return []*cdiapi.ContainerEdits{
		one(func(e *specs.ContainerEdits) { e.Env = all.Env }),
		one(func(e *specs.ContainerEdits) { e.DeviceNodes = all.DeviceNodes }),
		one(func(e *specs.ContainerEdits) { e.Mounts = all.Mounts }),
		one(func(e *specs.ContainerEdits) { e.Hooks = all.Hooks }),
		one(func(e *specs.ContainerEdits) { e.AdditionalGIDs = all.AdditionalGIDs }),
		one(func(e *specs.ContainerEdits) { e.IntelRdt = all.IntelRdt }),
		one(func(e *specs.ContainerEdits) { e.NetDevices = all.NetDevices }),
	}
}

// fullApply is what the shim did before configDoc: decode the whole spec,
// apply, encode.
func fullApply(t *testing.T, data []byte, e *cdiapi.ContainerEdits) oci.Spec {
	t.Helper()
	var s oci.Spec
	require.NoError(t, json.Unmarshal(data, &s))
	require.NoError(t, e.Apply(&s))
	return roundTrip(t, &s)
}

func roundTrip(t *testing.T, s *oci.Spec) oci.Spec {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var out oci.Spec
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func docApply(t *testing.T, data []byte, e *cdiapi.ContainerEdits) []byte {
	t.Helper()
	d, err := parseConfigDoc(data)
	require.NoError(t, err)
	require.NoError(t, e.Apply(d.spec()))
	out, err := d.encode(editedMembers(e)...)
	require.NoError(t, err)
	require.True(t, json.Valid(out), "%s", out)
	return out
}

func TestConfigDocMatchesFullDecode(t *testing.T) {
	runcDefault := bundleSpec(false, map[string]string{"a": "b"}, "XPU_VISIBLE_DEVICES=0")
	runcDefault.Mounts = []oci.Mount{{Destination: "/proc", Type: "proc", Source: "proc"}, {Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid"}}}
	runcDefault.Linux = &oci.Linux{
		Namespaces:  []oci.LinuxNamespace{{Type: oci.PIDNamespace}, {Type: oci.MountNamespace}},
		Resources:   &oci.LinuxResources{Devices: []oci.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}, Pids: &oci.LinuxPids{}},
		MaskedPaths: []string{"/proc/kcore"},
	}
	withUser := bundleSpec(true, nil)
	withUser.Process.User = oci.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{10, 44}}
	withUser.Linux = &oci.Linux{
		Devices:     []oci.LinuxDevice{{Path: "/dev/xpu0", Type: "c", Major: 1, Minor: 3}, {Path: "/dev/fuse", Type: "c", Major: 10, Minor: 229}},
		UIDMappings: []oci.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}},
		GIDMappings: []oci.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}},
		Namespaces:  []oci.LinuxNamespace{{Type: oci.UserNamespace}, {Type: oci.MountNamespace}},
	}
	withUser.Hooks = &oci.Hooks{CreateRuntime: []oci.Hook{{Path: "/usr/bin/other-hook"}}, Poststop: []oci.Hook{{Path: "/bin/cleanup"}}}
	noLinux := bundleSpec(false, nil)
	noLinux.Linux = nil
	noProcess := bundleSpec(false, nil)
	noProcess.Process = nil

	for _, tc := range []struct {
		name string
		spec *oci.Spec
	}{
		{"runc default-like", runcDefault},
		{"user, id mappings, devices and hooks present", withUser},
		{"no linux object", noLinux},
		{"no process object", noProcess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.MarshalIndent(tc.spec, "", "\t")
			require.NoError(t, err)
			for _, edits := range append(singleEdits(), testEdits()) {
				out := docApply(t, data, edits)
				var got oci.Spec
				require.NoError(t, json.Unmarshal(out, &got))
				require.Equal(t, fullApply(t, data, edits), roundTrip(t, &got), "edits %+v", edits.ContainerEdits)
			}
		})
	}
}

func TestConfigDocKeepsWhatItDoesNotEdit(t *testing.T) {
	// Members runtime-spec v1.3 does not know, at every level the shim
	// reads, and key order: all kept as they were.
	in := `{
	"ociVersion": "1.3.0",
	"zz-future": {"x": [1, 2, 3]},
	"process": {"args": ["sh"], "cwd": "/", "env": ["PATH=/bin"], "newProcessField": true, "user": {"uid": 0, "gid": 0}},
	"root": {"path": "rootfs"},
	"mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
	"linux": {"newLinuxField": "v", "resources": {"devices": [{"allow": false, "access": "rwm"}], "newResource": 7, "pids": {"limit": 9}}, "maskedPaths": ["/proc/kcore"]},
	"annotations": {"cdi.k8s.io/x": "vendor.test/xpu=0"}
}`
	out := docApply(t, []byte(in), testEdits())
	s := string(out)
	// Values the shim does not edit are the bytes they were.
	for _, keep := range []string{
		`"zz-future":{"x": [1, 2, 3]}`, `"newProcessField":true`, `"newLinuxField":"v"`, `"newResource":7`,
		`"pids":{"limit": 9}`, `"maskedPaths":["/proc/kcore"]`, `"root":{"path": "rootfs"}`, `"args":["sh"]`,
		`"annotations":{"cdi.k8s.io/x": "vendor.test/xpu=0"}`,
	} {
		require.Contains(t, s, keep)
	}
	order := []string{`"ociVersion"`, `"zz-future"`, `"process"`, `"root"`, `"mounts"`, `"linux"`, `"annotations"`, `"hooks"`}
	last := -1
	for _, k := range order {
		i := strings.Index(s, k)
		require.Greater(t, i, last, "%s out of order in %s", k, s)
		last = i
	}
	var got oci.Spec
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, fullApply(t, []byte(in), testEdits()), roundTrip(t, &got))
}

func TestConfigDocNoEditsIsIdentity(t *testing.T) {
	in := []byte(`{"ociVersion":"1.3.0","process":{"env":["A=1"],"user":{"uid":5,"gid":6}},"linux":{"devices":[{"path":"/dev/null","type":"c","major":1,"minor":3}]}}`)
	d, err := parseConfigDoc(in)
	require.NoError(t, err)
	out, err := d.encode()
	require.NoError(t, err)
	require.Equal(t, string(in), string(out))
}

func TestConfigDocRefusesAmbiguousOrBrokenInput(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not JSON", `{"process":`, "invalid JSON"},
		{"array", `[1]`, "not a JSON object"},
		{"trailing data", `{"a":1} {"b":2}`, "invalid character '{' after top-level value"},
		{"duplicate top-level key", `{"process":{"env":[]},"process":{"env":["XPU_VISIBLE_DEVICES=all"]}}`, `key "process" appears twice`},
		{"keys equal under case folding", `{"process":{"env":[]},"Process":{"env":["XPU_VISIBLE_DEVICES=all"]}}`, `keys "process" and "Process" both name the same member`},
		{"duplicate key in process", `{"process":{"env":[],"env":["XPU_VISIBLE_DEVICES=all"]}}`, `process: key "env" appears twice`},
		{"duplicate key in linux.resources", `{"linux":{"resources":{"devices":[],"devices":[]}}}`, `linux: resources: key "devices" appears twice`},
		{"process not an object", `{"process":[]}`, "process: not a JSON object"},
		{"env of the wrong type", `{"process":{"env":"A=1"}}`, "process: env: json: cannot unmarshal string"},
		{"mounts of the wrong type", `{"mounts":{}}`, "mounts: json: cannot unmarshal object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfigDoc([]byte(tc.in))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestConfigDocReadsKeysAsEncodingJSONDoes(t *testing.T) {
	// runc matches "Process" to the process member; so must the shim, or an
	// engine's odd casing would hide a request from it.
	d, err := parseConfigDoc([]byte(`{"Process":{"Env":["XPU_VISIBLE_DEVICES=1"]},"Annotations":{"k":"v"}}`))
	require.NoError(t, err)
	require.Equal(t, []string{"XPU_VISIBLE_DEVICES=1"}, d.spec().Process.Env)
	require.Equal(t, map[string]string{"k": "v"}, d.spec().Annotations)
	setVisibleDevices(d.spec().Process, []int{0})
	out, err := d.encode(memberEnv)
	require.NoError(t, err)
	require.Equal(t, `{"Process":{"Env":["XPU_VISIBLE_DEVICES=0"]},"Annotations":{"k":"v"}}`, string(out))
}

func FuzzConfigDoc(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"process":{"env":["XPU_VISIBLE_DEVICES=0"]},"linux":{}}`, `{"linux":{"resources":null}}`,
		`{"mounts":[{"destination":"/x"}],"hooks":{"prestart":[{"path":"/p"}]}}`, `{"process":null}`,
		`{"PROCESS":{"USER":{"UID":3}}}`, `{"linux":{"uidMappings":[{"containerID":0,"hostID":1,"size":1}],"namespaces":[{"type":"user"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := parseConfigDoc(data)
		if err != nil {
			return
		}
		var want oci.Spec
		if json.Unmarshal(data, &want) != nil {
			// Valid JSON that runtime-spec cannot decode somewhere the
			// shim does not read: the shim leaves that to the runtime.
			return
		}
		e := testEdits()
		if err := e.Apply(&want); err != nil {
			return
		}
		require.NoError(t, e.Apply(d.spec()))
		out, err := d.encode(editedMembers(e)...)
		require.NoError(t, err)
		var got oci.Spec
		require.NoError(t, json.Unmarshal(out, &got), "%s", out)
		require.Equal(t, roundTrip(t, &want), roundTrip(t, &got))
	})
}

func TestConfigDocDecodesEveryEditableMember(t *testing.T) {
	// encode writes back what cdicompat says Apply changes: each of those
	// members must be decoded into the view first, or its old value would
	// be lost.
	for _, name := range cdicompat.EditableMembers() {
		require.True(t, slices.ContainsFunc(configMembers, func(m configMember) bool { return m.path == name }), name)
		d, err := parseConfigDoc([]byte(`{}`))
		require.NoError(t, err)
		_, err = d.encode(name)
		require.NoError(t, err, name)
	}
	d, err := parseConfigDoc([]byte(`{}`))
	require.NoError(t, err)
	_, err = d.encode("annotations")
	require.ErrorContains(t, err, "annotations is not an editable member")
}
