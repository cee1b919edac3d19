package cdicompat

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

func specYAML(kind string, names ...string) string {
	var b strings.Builder
	b.WriteString("cdiVersion: 0.6.0\nkind: " + kind + "\ndevices:\n")
	for _, n := range names {
		b.WriteString("- name: \"" + n + "\"\n  containerEdits:\n    env: [\"X=" + n + "\"]\n")
	}
	return b.String()
}

// TestResolveSpecsAgreesWithTheCache: on spec directories of regular
// files, ReadSpecFiles and ResolveSpecs give the library's Cache's devices
// (with their spec's path and edits) and the same files in error.
func TestResolveSpecsAgreesWithTheCache(t *testing.T) {
	root := t.TempDir()
	low, high, absent := filepath.Join(root, "etc"), filepath.Join(root, "run"), filepath.Join(root, "absent")
	for path, content := range map[string]string{
		low + "/a.yaml":         specYAML("vendor.test/xpu", "0", "1", "2"),
		low + "/b.yaml":         specYAML("vendor.test/xpu", "2", "3"), // 2 conflicts with a.yaml
		low + "/other.json":     `{"cdiVersion":"0.6.0","kind":"other.test/npu","devices":[{"name":"0","containerEdits":{"env":["A=1"]}}]}`,
		low + "/bad.yaml":       "cdiVersion: 0.6.0\nkind: vendor.test/xpu\ndevices: []\n",
		low + "/unknown.yaml":   "cdiVersion: 0.6.0\nkind: vendor.test/xpu\nbogus: 1\n",
		low + "/empty.yaml":     "",
		low + "/noedits.yaml":   "cdiVersion: 0.6.0\nkind: vendor.test/xpu\ndevices:\n- name: \"9\"\n",
		low + "/badname.yaml":   specYAML("vendor.test/xpu", "-x"),
		low + "/ignored.txt":    specYAML("vendor.test/xpu", "7"),
		low + "/sub/c.yaml":     specYAML("vendor.test/xpu", "8"),
		high + "/override.yaml": specYAML("vendor.test/xpu", "1", "5"), // 1 overrides a.yaml's
		high + "/badkind.yaml":  specYAML("Vendor/xpu", "0"),
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	dirs := []string{low, absent, high}

	lib, _ := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	files, err := ReadSpecFiles(dirs)
	require.NoError(t, err)
	got := ResolveSpecs(files)

	require.Equal(t, lib.ListDevices(), got.ListDevices())
	for _, q := range lib.ListDevices() {
		want := lib.GetDevice(q)
		d := got.Devices[q]
		require.Equal(t, want.GetSpec().GetPath(), d.Spec.Path, q)
		require.Equal(t, want.GetSpec().GetPriority(), d.Spec.Priority, q)
		require.Equal(t, want.ContainerEdits, d.ContainerEdits, q)
		require.Equal(t, want.GetSpec().ContainerEdits, d.Spec.ContainerEdits, q)
	}
	require.Equal(t, slices.Sorted(maps.Keys(lib.GetErrors())), slices.Sorted(maps.Keys(got.Errors)), "the same files in error")
	for p, errs := range lib.GetErrors() {
		require.Len(t, got.Errors[p], len(errs), p)
	}
	require.Error(t, got.Err())
	var vendors []string
	for _, s := range got.Specs {
		vendors = append(vendors, s.Vendor)
	}
	require.Len(t, lib.GetVendorSpecs("vendor.test"), strings.Count(strings.Join(vendors, " "), "vendor.test"))
}

// TestReadSpecFilesHostile: a FIFO named other.yaml, a link to /dev/zero, a
// file over MaxSpecSize and a FIFO in place of a spec directory give
// errors at once; the other specs are still read. (The library's Cache
// blocks on the FIFO forever.)
func TestReadSpecFilesHostile(t *testing.T) {
	root := t.TempDir()
	dir, fifoDir := filepath.Join(root, "cdi"), filepath.Join(root, "fifo")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(specYAML("vendor.test/xpu", "0")), 0o644))
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "other.yaml"), 0o644))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")))
	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, nil, 0o644))
	require.NoError(t, os.Truncate(big, MaxSpecSize+1))
	require.NoError(t, unix.Mkfifo(fifoDir, 0o644))

	type result struct {
		specs *Specs
		err   error
	}
	done := make(chan result, 1)
	go func() {
		files, err := ReadSpecFiles([]string{dir})
		done <- result{ResolveSpecs(files), err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("reading the spec directory blocks")
	}
	require.NoError(t, r.err)
	require.Equal(t, []string{"vendor.test/xpu=0"}, r.specs.ListDevices())
	for _, name := range []string{"other.yaml", "zero.yaml"} {
		p := filepath.Join(dir, name)
		require.Len(t, r.specs.Errors[p], 1, p)
		require.ErrorIs(t, r.specs.Errors[p][0], fdio.ErrNotRegular)
		require.ErrorContains(t, r.specs.Errors[p][0], p)
	}
	require.ErrorIs(t, r.specs.Errors[big][0], fdio.ErrTooLarge)

	_, err := ReadSpecFiles([]string{fifoDir})
	require.ErrorIs(t, err, unix.ENOTDIR)
}

// TestShadowsAgreeWithTheCache: a device defined by specs in two spec
// directories is shadowed in the earlier one; the winner Shadows names is
// the spec the library's Cache takes the device from. Same-priority
// conflicts and devices only one spec defines are no shadows.
func TestShadowsAgreeWithTheCache(t *testing.T) {
	root := t.TempDir()
	etc, run := filepath.Join(root, "etc"), filepath.Join(root, "run")
	for path, content := range map[string]string{
		etc + "/baidu.com-xpu.yaml": specYAML("baidu.com/xpu", "0", "1", "2", "3", "4", "5", "stale"),
		run + "/baidu.com-xpu.yaml": specYAML("baidu.com/xpu", "0", "1", "2", "3", "4", "5"),
		etc + "/a.yaml":             specYAML("vendor.test/xpu", "0", "1"),
		etc + "/b.yaml":             specYAML("vendor.test/xpu", "1"), // same priority: a conflict
		run + "/other.yaml":         specYAML("other.test/npu", "0"),
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	dirs := []string{etc, run}
	files, err := ReadSpecFiles(dirs)
	require.NoError(t, err)
	got := ResolveSpecs(files).Shadows()
	require.Len(t, got, 1, "%v", got)
	sh := got[0]
	require.Equal(t, "baidu.com/xpu", sh.Kind)
	require.Equal(t, etc+"/baidu.com-xpu.yaml", sh.Shadowed)
	require.Equal(t, run+"/baidu.com-xpu.yaml", sh.Winner)
	require.Equal(t, []string{"baidu.com/xpu=0", "baidu.com/xpu=1", "baidu.com/xpu=2", "baidu.com/xpu=3", "baidu.com/xpu=4", "baidu.com/xpu=5"}, sh.Devices)
	require.Contains(t, sh.String(), "baidu.com/xpu=3 and 2 more (6 device(s) of baidu.com/xpu); engines use "+run+"/baidu.com-xpu.yaml")

	lib, _ := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	for _, q := range sh.Devices {
		d := lib.GetDevice(q)
		require.NotNil(t, d, q)
		require.Equal(t, sh.Winner, d.GetSpec().GetPath(), "the library takes %s from the winner", q)
	}
	require.Equal(t, etc+"/baidu.com-xpu.yaml", lib.GetDevice("baidu.com/xpu=stale").GetSpec().GetPath(), "only the shadowed spec defines it")

	// The directories the other way round: the other file wins.
	files, err = ReadSpecFiles([]string{run, etc})
	require.NoError(t, err)
	got = ResolveSpecs(files).Shadows()
	require.Len(t, got, 1)
	require.Equal(t, run+"/baidu.com-xpu.yaml", got[0].Shadowed)
	require.Equal(t, etc+"/baidu.com-xpu.yaml", got[0].Winner)
}
