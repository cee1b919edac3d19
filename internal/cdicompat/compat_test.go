package cdicompat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/specs-go"
)

// This file is the one suite that runs every mirror of this package
// against the CDI library it mirrors.

func TestMirroredVersion(t *testing.T) {
	// Test binaries carry no module list (debug.ReadBuildInfo), so the
	// version comes from go.mod, two levels up.
	data, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == LibraryModule {
			require.Equal(t, MirroredVersion, f[1],
				"the CDI library changed: re-read the functions each file of this package mirrors, then bump MirroredVersion")
			return
		}
	}
	t.Fatalf("go.mod does not require %s", LibraryModule)
}

func charNode(path string, minor int64) specs.DeviceNode {
	return specs.DeviceNode{Path: path, Type: "c", Major: 195, Minor: minor}
}

func validSpec() *specs.Spec {
	return &specs.Spec{
		Version:        "0.5.0",
		Kind:           "vendor.test/xpu",
		ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{ptr(charNode("/dev/xpuctrl", 255))}},
		Devices: []specs.Device{
			{Name: "0", ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{ptr(charNode("/dev/xpu0", 0))}}},
			{Name: "0000:3b:00.0", ContainerEdits: specs.ContainerEdits{Env: []string{"A=1"}}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func TestValidateSpecAgreesWithReadSpec(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*specs.Spec)
	}{
		{name: "valid", mutate: func(*specs.Spec) {}},
		{name: "version older than the content needs", mutate: func(s *specs.Spec) {
			s.Version = "0.3.0"
			s.Devices[0].ContainerEdits.DeviceNodes[0].HostPath = "/dev/xpu0"
		}},
		{name: "unknown version", mutate: func(s *specs.Spec) { s.Version = "9.9.9" }},
		{name: "bad vendor", mutate: func(s *specs.Spec) { s.Kind = "-vendor/xpu" }},
		{name: "bad class", mutate: func(s *specs.Spec) { s.Kind = "vendor.test/x!pu" }},
		{name: "no class", mutate: func(s *specs.Spec) { s.Kind = "vendor.test" }},
		{name: "bad device name", mutate: func(s *specs.Spec) { s.Devices[0].Name = "-0" }},
		{name: "duplicate device", mutate: func(s *specs.Spec) { s.Devices[1].Name = "0" }},
		{name: "device without edits", mutate: func(s *specs.Spec) { s.Devices[1].ContainerEdits = specs.ContainerEdits{} }},
		{name: "no devices", mutate: func(s *specs.Spec) { s.Devices = nil }},
		{name: "bad env in a device", mutate: func(s *specs.Spec) { s.Devices[1].ContainerEdits.Env = []string{"NOEQUALS"} }},
		{name: "relative node path spec-wide", mutate: func(s *specs.Spec) { s.ContainerEdits.DeviceNodes[0].Path = "dev/xpuctrl" }},
		{name: "bad node type", mutate: func(s *specs.Spec) { s.Devices[0].ContainerEdits.DeviceNodes[0].Type = "x" }},
		{name: "hook without path", mutate: func(s *specs.Spec) {
			s.ContainerEdits.Hooks = []*specs.Hook{{HookName: "createContainer"}}
		}},
		{name: "bad hook name", mutate: func(s *specs.Spec) {
			s.ContainerEdits.Hooks = []*specs.Hook{{HookName: "beforeEverything", Path: "/bin/true"}}
		}},
		{name: "relative mount", mutate: func(s *specs.Spec) {
			s.Devices[1].ContainerEdits.Mounts = []*specs.Mount{{HostPath: "/a", ContainerPath: "b"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := validSpec()
			tc.mutate(spec)
			data, err := json.Marshal(spec)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "spec.json")
			require.NoError(t, os.WriteFile(path, data, 0o644))
			_, libErr := cdiapi.ReadSpec(path, 0)
			ourErr := ValidateSpec(spec)
			require.Equal(t, libErr == nil, ourErr == nil, "library: %v; ours: %v", libErr, ourErr)
		})
	}
}

// writeSpec writes spec as JSON into dir.
func writeSpec(t *testing.T, dir, name string, spec *specs.Spec) {
	t.Helper()
	data, err := json.Marshal(spec)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
}

func baseOCISpec() *oci.Spec {
	return &oci.Spec{
		Version: "1.2.0",
		Process: &oci.Process{Env: []string{"PATH=/bin", "A=0"}, User: oci.User{UID: 1000, GID: 1000}},
		Root:    &oci.Root{Path: "rootfs"},
		Mounts:  []oci.Mount{{Destination: "/proc", Type: "proc", Source: "proc"}},
		Linux:   &oci.Linux{Resources: &oci.LinuxResources{}},
	}
}

func TestCollectEditsAgreesWithInjectDevices(t *testing.T) {
	dirs := []string{filepath.Join(t.TempDir(), "etc"), filepath.Join(t.TempDir(), "run")}
	a := validSpec()
	a.ContainerEdits.Env = []string{"A=spec-a", "SPEC=a"}
	a.ContainerEdits.Mounts = []*specs.Mount{{HostPath: "/a/lib", ContainerPath: "/usr/lib/x", Options: []string{"ro", "bind"}}}
	a.Devices = append(a.Devices, specs.Device{Name: "1", ContainerEdits: specs.ContainerEdits{
		DeviceNodes: []*specs.DeviceNode{ptr(charNode("/dev/xpu1", 1))},
		Env:         []string{"A=device-1"},
		Mounts:      []*specs.Mount{{HostPath: "/a/lib1", ContainerPath: "/usr/lib/x", Options: []string{"ro", "bind"}}},
	}})
	b := &specs.Spec{
		Version:        "0.5.0",
		Kind:           "other.test/acc",
		ContainerEdits: specs.ContainerEdits{Env: []string{"A=spec-b"}, Hooks: []*specs.Hook{{HookName: "createContainer", Path: "/bin/true", Env: []string{"PATH=/bin"}}}},
		Devices:        []specs.Device{{Name: "x", ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{ptr(charNode("/dev/acc0", 7))}, Env: []string{"A=x"}}}},
	}
	writeSpec(t, dirs[0], "a.yaml", a)
	writeSpec(t, dirs[1], "b.json", b)
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	require.NoError(t, err)

	for _, request := range [][]string{
		{"vendor.test/xpu=0"},
		{"vendor.test/xpu=1", "vendor.test/xpu=0"},
		{"other.test/acc=x", "vendor.test/xpu=1", "vendor.test/xpu=0000:3b:00.0"},
		{"vendor.test/xpu=0", "other.test/acc=x", "vendor.test/xpu=1", "vendor.test/xpu=0"},
	} {
		want := baseOCISpec()
		_, err := cache.InjectDevices(want, request...)
		require.NoError(t, err, "%v", request)

		specIndex := map[*cdiapi.Spec]int{}
		var resolved []Resolved
		for _, name := range request {
			d := cache.GetDevice(name)
			require.NotNil(t, d, name)
			s := d.GetSpec()
			if _, ok := specIndex[s]; !ok {
				specIndex[s] = len(specIndex)
			}
			resolved = append(resolved, Resolved{
				Spec:      specIndex[s],
				SpecEdits: func() (*specs.ContainerEdits, error) { return &s.ContainerEdits, nil },
				Edits:     func() (*specs.ContainerEdits, error) { return &d.ContainerEdits, nil },
			})
		}
		edits, err := CollectEdits(resolved)
		require.NoError(t, err)
		got := baseOCISpec()
		require.NoError(t, edits.Apply(got))
		require.Equal(t, want, got, "%v", request)
	}

	failing := errors.New("unreadable edits")
	_, err = CollectEdits([]Resolved{{SpecEdits: func() (*specs.ContainerEdits, error) { return nil, failing }}})
	require.ErrorIs(t, err, failing)
}

// changedMembers applies e with the library and names the members of the
// OCI spec whose JSON changed, in the order EditedMembers promises.
func changedMembers(t *testing.T, e *specs.ContainerEdits) []Member {
	t.Helper()
	before := baseOCISpec()
	after := baseOCISpec()
	require.NoError(t, (&cdiapi.ContainerEdits{ContainerEdits: e}).Apply(after))
	differs := func(get func(*oci.Spec) any) bool {
		x, err := json.Marshal(get(before))
		require.NoError(t, err)
		y, err := json.Marshal(get(after))
		require.NoError(t, err)
		return string(x) != string(y)
	}
	// Every member of the spec is compared: a change outside the ones
	// named fails the test below.
	rest := func(s *oci.Spec) any {
		c := *s
		p, l, r := *c.Process, *c.Linux, *c.Linux.Resources
		p.Env, p.User, c.Mounts, c.Hooks, l.Devices, r.Devices, l.NetDevices, l.IntelRdt = nil, oci.User{}, nil, nil, nil, nil, nil, nil
		l.Resources = &r
		c.Process, c.Linux = &p, &l
		return c
	}
	require.False(t, differs(rest), "Apply changed a member EditedMembers does not know")
	var out []Member
	for _, m := range []struct {
		name Member
		get  func(*oci.Spec) any
	}{
		{"process.env", func(s *oci.Spec) any { return s.Process.Env }},
		{"linux.devices", func(s *oci.Spec) any { return s.Linux.Devices }},
		{"linux.resources.devices", func(s *oci.Spec) any { return s.Linux.Resources.Devices }},
		{"mounts", func(s *oci.Spec) any { return s.Mounts }},
		{"hooks", func(s *oci.Spec) any { return s.Hooks }},
		{"linux.intelRdt", func(s *oci.Spec) any { return s.Linux.IntelRdt }},
		{"process.user", func(s *oci.Spec) any { return s.Process.User }},
		{"linux.netDevices", func(s *oci.Spec) any { return s.Linux.NetDevices }},
	} {
		if differs(m.get) {
			out = append(out, m.name)
		}
	}
	return out
}

func TestEditedMembersAgreeWithApply(t *testing.T) {
	all := specs.ContainerEdits{
		Env:            []string{"X=1"},
		DeviceNodes:    []*specs.DeviceNode{ptr(charNode("/dev/xpu0", 0))},
		Mounts:         []*specs.Mount{{HostPath: "/lib/x", ContainerPath: "/usr/lib/x", Options: []string{"ro", "bind"}}},
		Hooks:          []*specs.Hook{{HookName: "createContainer", Path: "/bin/true"}},
		IntelRdt:       &specs.IntelRdt{ClosID: "clos"},
		AdditionalGIDs: []uint32{44},
		NetDevices:     []*specs.LinuxNetDevice{{HostInterfaceName: "eth9", Name: "net9"}},
	}
	cases := map[string]specs.ContainerEdits{
		"none":            {},
		"env":             {Env: all.Env},
		"device node":     {DeviceNodes: all.DeviceNodes},
		"mount":           {Mounts: all.Mounts},
		"hook":            {Hooks: all.Hooks},
		"intelRdt":        {IntelRdt: all.IntelRdt},
		"additional GIDs": {AdditionalGIDs: all.AdditionalGIDs},
		"net device":      {NetDevices: all.NetDevices},
		"all":             all,
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range cases {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Run(name, func(t *testing.T) {
			e := cases[name]
			require.Equal(t, changedMembers(t, &e), EditedMembers(&e))
		})
	}
	require.Equal(t, EditedMembers(&all), EditableMembers(), "every member Apply may change")
}

func TestSpecDirsAgreeWithTheCache(t *testing.T) {
	tmp := t.TempDir()
	for _, dirs := range [][]string{
		nil,
		{tmp + "/a/../b/", tmp + "//c"},
		{tmp},
	} {
		opts := []cdiapi.Option{cdiapi.WithAutoRefresh(false)}
		if dirs != nil {
			opts = append(opts, cdiapi.WithSpecDirs(dirs...))
		}
		cache, _ := cdiapi.NewCache(opts...)
		require.Equal(t, cache.GetSpecDirectories(), SpecDirs(dirs), "%q", dirs)
	}
}

// TestSpecFilesAgreeWithTheCache checks the files SpecFiles visits, and the
// order it visits them in, against the specs the library's cache reads: the
// cache appends a vendor's specs in the order it reads them
// (GetVendorSpecs), so every spec has the one vendor (each its own class).
// The directories are given in an order that is not the sorted order of
// their paths, and the names sort differently by byte and by letter.
func TestSpecFilesAgreeWithTheCache(t *testing.T) {
	tmp := t.TempDir()
	dirs := []string{filepath.Join(tmp, "z-etc"), filepath.Join(tmp, "absent"), filepath.Join(tmp, "a-run")}
	spec := func(class string) *specs.Spec {
		s := validSpec()
		s.Kind = "vendor.test/" + class
		return s
	}
	writeSpec(t, dirs[0], "b.json", spec("b"))
	writeSpec(t, dirs[0], "a.yaml", spec("a"))
	writeSpec(t, dirs[0], "B.yaml", spec("upper-b"))       // before a.yaml: entries sorted by byte
	writeSpec(t, dirs[0], "c.yml", spec("c"))              // not read: .yml
	writeSpec(t, dirs[0], "d.yaml.bak", spec("d"))         // not read
	writeSpec(t, dirs[0]+"/sub.yaml", "e.yaml", spec("e")) // a directory named like a spec, and a subdirectory
	writeSpec(t, dirs[2], "f.yaml", spec("f"))
	writeSpec(t, dirs[2], "0.json", spec("zero")) // first of its directory, after every file of dirs[0]
	writeSpec(t, dirs[2], "A.JSON", spec("g"))    // not read: the extension is case-sensitive

	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	require.NoError(t, err)
	type file struct {
		path     string
		priority int
	}
	require.Equal(t, []string{"vendor.test"}, cache.ListVendors())
	var want []file
	for _, s := range cache.GetVendorSpecs("vendor.test") {
		want = append(want, file{s.GetPath(), s.GetPriority()})
	}
	var got []file
	var absent []string
	require.NoError(t, SpecFiles(dirs, func(dir, name string, err error) error {
		if errors.Is(err, ErrDirAbsent) {
			absent = append(absent, dir)
			return nil
		}
		got = append(got, file{filepath.Join(dir, name), slices.Index(dirs, dir)})
		return nil
	}))
	require.Equal(t, want, got, "the same files in the same order")
	require.Equal(t, []file{
		{filepath.Join(dirs[0], "B.yaml"), 0},
		{filepath.Join(dirs[0], "a.yaml"), 0},
		{filepath.Join(dirs[0], "b.json"), 0},
		{filepath.Join(dirs[2], "0.json"), 2},
		{filepath.Join(dirs[2], "f.yaml"), 2},
	}, got, "directories in the given order, names sorted by byte")
	require.Equal(t, []string{dirs[1]}, absent)
}
