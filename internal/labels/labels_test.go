package labels

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func hostOf(t *testing.T, shape string) *discover.Host {
	t.Helper()
	h, err := fakehost.ShapeByName(shape, 4, 4)
	require.NoError(t, err)
	tree := fakehosttest.Build(t, h)
	host, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	return host
}

func TestForShapes(t *testing.T) {
	for _, shape := range fakehost.Shapes() {
		t.Run(shape, func(t *testing.T) {
			ls := For(hostOf(t, shape), "", &sharing.Config{Replicas: 4, ResourceName: "baidu.com/xpu"})
			t.Logf("%v", ls)
			for _, l := range ls {
				require.Empty(t, validation.IsQualifiedName(l.Key), l.Key)
				require.Empty(t, validation.IsValidLabelValue(l.Value), "%s=%q", l.Key, l.Value)
			}
		})
	}
}

func TestForP800(t *testing.T) {
	h := hostOf(t, fakehost.ShapeP800x8)
	require.Equal(t, []Label{
		{Present, "true"},
		{Count, "8"},
		{Model, "P800"},
		{Family, "Kunlun3"},
		{DriverVersion, fakehost.DriverVersionP800},
		{XREVersion, fakehost.DriverVersionP800},
		{Memory, "98304"},
	}, For(h, "", nil), "no sharing labels without the sharing configuration")
	none := sharing.None("baidu.com/xpu")
	ls := For(h, "", &none)
	require.Equal(t, []Label{{SharingStrategy, "none"}, {Replicas, "1"}}, ls[len(ls)-2:])

	// Driver 5.x without /proc/xpu: what is not known is left out.
	ls = For(hostOf(t, fakehost.ShapeP800XRE5), "", nil)
	require.Equal(t, []Label{{Present, "true"}, {Count, "8"}, {XREVersion, fakehost.XREVersionP800}}, ls)
}

func TestForNoXPU(t *testing.T) {
	require.Nil(t, For(&discover.Host{}, "", nil))
	// Only a PF with VFs enabled and no VF node: nothing to schedule on.
	h := &discover.Host{Devices: []*discover.Device{{Index: 0, Model: "R200", Compute: false}}}
	require.Nil(t, For(h, "", nil))
}

func TestSanitize(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"5.0.21.21", "5.0.21.21", true},
		{"P800 OAM", "P800-OAM", true},
		{"R200-8F", "R200-8F", true},
		{" 4.0.25\n", "4.0.25", true},
		{"Kunlun2 VF", "Kunlun2-VF", true},
		{"v1+build/7", "v1-build-7", true},
		{"-x-", "x", true},
		{"..", "", false},
		{"", "", false},
		{"昆仑", "", false},
		{"a昆仑b", "a------b", true},
		{strings.Repeat("a", 70), strings.Repeat("a", 63), true},
		{strings.Repeat("a", 62) + "-b", strings.Repeat("a", 62), true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := Sanitize(tc.in)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
			if ok {
				require.Empty(t, validation.IsValidLabelValue(got))
			}
		})
	}
}

func FuzzSanitize(f *testing.F) {
	f.Add("P800 OAM")
	f.Add("5.0.21.21")
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := Sanitize(v)
		if ok && len(validation.IsValidLabelValue(got)) != 0 {
			t.Fatalf("Sanitize(%q) = %q, not a label value", v, got)
		}
		if !ok && got != "" {
			t.Fatalf("Sanitize(%q) = %q but not ok", v, got)
		}
	})
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "xpu-cdi")
	ls := []Label{{Present, "true"}, {Count, "2"}}

	res, err := WriteFile(path, ls, "test")
	require.NoError(t, err)
	require.Equal(t, Written, res)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "# Written by test: node labels of the Kunlun XPUs, read by Node Feature Discovery's local source.\nbaidu.com/xpu.present=true\nbaidu.com/xpu.count=2\n", string(data))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	res, err = WriteFile(path, ls, "test")
	require.NoError(t, err)
	require.Equal(t, Unchanged, res, "same labels: the file is not rewritten")

	res, err = WriteFile(path, ls[:1], "test")
	require.NoError(t, err)
	require.Equal(t, Written, res)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary dot-file left")

	res, err = WriteFile(path, nil, "test")
	require.NoError(t, err)
	require.Equal(t, Removed, res)
	require.NoFileExists(t, path)
	res, err = WriteFile(path, nil, "test")
	require.NoError(t, err)
	require.Equal(t, Absent, res)
}

func TestWriteFileRefuses(t *testing.T) {
	dir := t.TempDir()
	ls := []Label{{Present, "true"}}
	_, err := WriteFile(filepath.Join(dir, ".hidden"), ls, "test")
	require.ErrorContains(t, err, "NFD ignores files whose name starts with a dot")
	_, err = WriteFile(filepath.Join(dir, "missing", "xpu-cdi"), ls, "test")
	require.ErrorContains(t, err, "is Node Feature Discovery installed?")
	require.NoDirExists(t, filepath.Join(dir, "missing"))

	// A symlink planted at the target is not followed.
	target := filepath.Join(dir, "elsewhere")
	require.NoError(t, os.WriteFile(target, []byte("keep\n"), 0o644))
	link := filepath.Join(dir, "xpu-cdi")
	require.NoError(t, os.Symlink(target, link))
	_, err = WriteFile(link, ls, "test")
	require.ErrorContains(t, err, "symlink")
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "keep\n", string(data))

	// Too many labels for NFD.
	var many []Label
	for range 2000 {
		many = append(many, Label{Present, strings.Repeat("a", 63)})
	}
	path := filepath.Join(dir, "big")
	_, err = WriteFile(path, many, "test")
	require.ErrorContains(t, err, "above NFD's limit of 65536")
	require.NoFileExists(t, path)
}

// TestForPartitions: the layout in its label form on hosts with an
// SR-IOV card, one count per partition size present; nothing of it on a
// host without SR-IOV.
func TestForPartitions(t *testing.T) {
	for _, tc := range []struct {
		shape string
		want  []Label
	}{
		{fakehost.ShapeP800SRIOV, []Label{{PartitionLayout, "0-2_3-0"}, {"baidu.com/xpu-48gb.count", "2"}}},
		{fakehost.ShapeP800Quarters, []Label{{PartitionLayout, "0-4_5-0"}, {"baidu.com/xpu-24gb.count", "4"}}},
		{fakehost.ShapeR200SRIOV, []Label{{PartitionLayout, "0-3_1-0"}, {"baidu.com/xpu-5gb.count", "3"}}},
		{fakehost.ShapeP800x8, nil},
		{fakehost.ShapeK200, nil},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			var got []Label
			for _, l := range For(hostOf(t, tc.shape), "", nil) {
				if l.Key == PartitionLayout || strings.HasSuffix(l.Key, "gb.count") {
					got = append(got, l)
				}
			}
			require.Equal(t, tc.want, got)
			for _, l := range got {
				require.Empty(t, validation.IsQualifiedName(l.Key), l.Key)
			}
		})
	}

	// The counts follow the device plugin's resource name; one too long
	// for a label key leaves its counts out, not a label the API server
	// would refuse.
	quarters := hostOf(t, fakehost.ShapeP800Quarters)
	require.Contains(t, For(quarters, "kunlunxin.com/xpu", nil), Label{"kunlunxin.com/xpu-24gb.count", "4"})
	for _, l := range For(quarters, "kunlunxin.com/xpu", nil) {
		require.False(t, strings.HasPrefix(l.Key, "baidu.com/xpu-"), "%s does not follow the resource name", l.Key)
	}
	long := "example.com/" + strings.Repeat("x", 60)
	for _, l := range For(quarters, long, nil) {
		require.False(t, strings.HasSuffix(l.Key, ".count") && l.Key != Count, "%s is no valid label key", l.Key)
	}

	// Every card cut alike: all=N; a layout's label form reads back.
	h := hostOf(t, fakehost.ShapeP800SRIOV)
	for _, d := range h.Devices {
		if d.PCI.Function == discover.FunctionPF && d.PCI.NumVFs == 0 {
			d.PCI.NumVFs = 2
		}
	}
	ls := For(h, "", nil)
	require.Contains(t, ls, Label{PartitionLayout, "all-2"})
}

// TestGolden: the whole feature file of the SR-IOV shapes and of a host
// without SR-IOV (testdata/<shape>.labels; go test -update rewrites them).
func TestGolden(t *testing.T) {
	for _, shape := range []string{fakehost.ShapeP800SRIOV, fakehost.ShapeR200SRIOV, fakehost.ShapeP800x8} {
		t.Run(shape, func(t *testing.T) {
			s := sharing.None("baidu.com/xpu")
			data, err := Encode(For(hostOf(t, shape), "", &s), "xpu-cdi labels")
			require.NoError(t, err)
			testutil.Golden(t, shape+".labels", data)
		})
	}
}

// The layout request label is a valid label key under the prefix the
// NodeRestriction admission plugin keeps a node's kubelet from setting on
// its own Node (node-restriction.kubernetes.io/).
func TestPartitionLayoutRequestKey(t *testing.T) {
	require.Empty(t, validation.IsQualifiedName(PartitionLayoutRequest))
	prefix, _, ok := strings.Cut(PartitionLayoutRequest, "/")
	require.True(t, ok)
	require.Equal(t, "node-restriction.kubernetes.io", prefix)
	require.Empty(t, validation.IsQualifiedName(PartitionLayout))
}
