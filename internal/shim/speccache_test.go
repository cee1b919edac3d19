package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/config"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio/fdiotest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/xpurequest"
)

// testSpec is a small CDI spec of kind vendor.test/xpu whose devices set
// one variable each and whose spec-wide edits set a variable and a mount.
func testSpec(prefix string, names ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cdiVersion: 0.6.0\nkind: vendor.test/xpu\ncontainerEdits:\n  env: [SPEC=%s]\n  mounts:\n  - {hostPath: /%s, containerPath: /%s, options: [ro, bind]}\ndevices:\n", prefix, prefix, prefix)
	for _, n := range names {
		fmt.Fprintf(&b, "- name: %q\n  containerEdits:\n    env: [DEV_%s=%s]\n    deviceNodes:\n    - {path: /dev/xpu%s, type: c, major: 243, minor: 1}\n", n, n, prefix, n)
	}
	return b.String()
}

func cdiConfig(t *testing.T, specDirs ...string) *config.Config {
	t.Helper()
	c := config.Default()
	c.Mode = config.ModeCDI
	c.Vendor = "vendor.test"
	c.SpecDirs = specDirs
	c.CacheDir = filepath.Join(t.TempDir(), "cache")
	return c
}

// modify runs ModifyBundle on a fresh bundle asking for names by
// annotation and returns the resulting spec and the log.
func modify(t *testing.T, c *config.Config, names ...string) (*oci.Spec, *logtest.Recorder, error) {
	t.Helper()
	ann := map[string]string{}
	for i, n := range names {
		ann[fmt.Sprintf("cdi.k8s.io/t%d", i)] = "vendor.test/xpu=" + n
	}
	dir, _ := writeBundle(t, bundleSpec(false, ann))
	log := &logtest.Recorder{}
	_, err := ModifyBundle(dir, c, Settings{Log: log})
	if err != nil {
		return nil, log, err
	}
	return readBundle(t, dir), log, nil
}

func TestSpecCacheMissThenHit(t *testing.T) {
	specDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(specDir, "xpu.yaml"), []byte(testSpec("a", "0", "1")), 0o644))
	c := cdiConfig(t, specDir)

	first, log, err := modify(t, c, "1", "0")
	require.NoError(t, err)
	require.False(t, log.Has("spec cache hit"))
	entries, err := filepath.Glob(filepath.Join(c.CacheDir, "cdi-*.json"))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	st, err := os.Stat(entries[0])
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	st, err = os.Stat(c.CacheDir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	second, log, err := modify(t, c, "1", "0")
	require.NoError(t, err)
	require.True(t, log.Has("spec cache hit"), log.Lines())
	require.Equal(t, first, second)
	require.Contains(t, second.Process.Env, "SPEC=a")
	require.Contains(t, second.Process.Env, "DEV_1=a")

	// Unknown names are still unknown on a hit, with the valid ones listed.
	_, _, err = modify(t, c, "7")
	require.ErrorIs(t, err, errUnknownDevice)
	require.ErrorContains(t, err, "valid names of vendor.test/xpu (cdi mode): 0, 1")
}

func TestSpecCacheFollowsEveryChange(t *testing.T) {
	low, high := t.TempDir(), t.TempDir()
	write := func(dir, name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write(low, "xpu.yaml", testSpec("a", "0", "1"))
	c := cdiConfig(t, low, high)
	_, _, err := modify(t, c, "0")
	require.NoError(t, err)

	for _, step := range []struct {
		description string
		change      func()
		wantEnv     []string
	}{
		{"content of the spec changes", func() { write(low, "xpu.yaml", testSpec("b", "0", "1")) }, []string{"SPEC=b", "DEV_0=b"}},
		{"a spec in a higher-priority directory takes the device over", func() { write(high, "over.json", jsonSpec("c", "0")) }, []string{"SPEC=c", "DEV_0=c"}},
		{"that spec is renamed to a non-spec name", func() {
			require.NoError(t, os.Rename(filepath.Join(high, "over.json"), filepath.Join(high, "over.json.bak")))
		}, []string{"SPEC=b", "DEV_0=b"}},
		{"a spec of another kind appears", func() {
			write(low, "gpu.yaml", "cdiVersion: 0.5.0\nkind: other.test/gpu\ndevices:\n- name: g\n  containerEdits:\n    env: [G=1]\n")
		}, []string{"SPEC=b", "DEV_0=b"}},
		{"same size, one byte different", func() { write(low, "xpu.yaml", testSpec("d", "0", "1")) }, []string{"SPEC=d", "DEV_0=d"}},
	} {
		step.change()
		got, log, err := modify(t, c, "0")
		require.NoError(t, err, step.description)
		require.False(t, log.Has("spec cache hit"), "%s: stale entry used", step.description)
		for _, e := range step.wantEnv {
			require.Contains(t, got.Process.Env, e, step.description)
		}
		// And the new entry is used next time.
		again, log, err := modify(t, c, "0")
		require.NoError(t, err)
		require.True(t, log.Has("spec cache hit"), step.description)
		require.Equal(t, got, again, step.description)
	}
}

func jsonSpec(prefix string, names ...string) string {
	var devs []string
	for _, n := range names {
		devs = append(devs, fmt.Sprintf(`{"name":%q,"containerEdits":{"env":["DEV_%s=%s"],"deviceNodes":[{"path":"/dev/xpu%s","type":"c","major":243,"minor":2}]}}`, n, n, prefix, n))
	}
	return fmt.Sprintf(`{"cdiVersion":"0.6.0","kind":"vendor.test/xpu","containerEdits":{"env":["SPEC=%s"]},"devices":[%s]}`, prefix, strings.Join(devs, ","))
}

// TestSpecCacheInjectsAsTheLibrary compares the shim (cache miss and hit)
// with the CDI library's own Cache.InjectDevices on specs spread over two
// directories, with a device taken over by the higher-priority one and a
// conflict between two files of the same directory.
func TestSpecCacheInjectsAsTheLibrary(t *testing.T) {
	low, high := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(low, "a.yaml"), []byte(testSpec("a", "0", "1", "2")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(low, "b.yaml"), []byte(strings.ReplaceAll(testSpec("b", "2", "3"), "/dev/xpu", "/dev/xpub")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(high, "c.json"), []byte(jsonSpec("c", "1", "4")), 0o644))
	c := cdiConfig(t, low, high)
	lib, err := cdiapi.NewCache(cdiapi.WithSpecDirs(low, high), cdiapi.WithAutoRefresh(false))
	require.NoError(t, err)
	require.NotEmpty(t, lib.GetErrors(), "device 2 is defined twice in one directory")

	for _, names := range [][]string{{"0"}, {"1"}, {"0", "1"}, {"4", "0", "3", "1"}, {"3"}} {
		var q []string
		for _, n := range names {
			q = append(q, "vendor.test/xpu="+n)
		}
		ann := map[string]string{}
		for i, n := range q {
			ann[fmt.Sprintf("cdi.k8s.io/t%d", i)] = n
		}
		want := bundleSpec(false, ann)
		_, err := lib.InjectDevices(want, q...)
		require.NoError(t, err)
		for range 2 { // miss, then hit
			got, log, err := modify(t, c, names...)
			require.NoError(t, err, names)
			require.True(t, log.Has("conflicting device"), "the library's complaint is passed on: %v", log.Lines())
			got.Process.Env = slicesDelete(got.Process.Env, xpurequest.VisibleDevicesEnv+"=")
			require.Equal(t, roundTrip(t, want), roundTrip(t, got), names)
		}
	}
	_, _, err = modify(t, c, "2")
	require.ErrorIs(t, err, errUnknownDevice, "a conflicting device is nobody's")
}

func slicesDelete(env []string, prefix string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func TestSpecCacheDistrustsWhatOthersCanWrite(t *testing.T) {
	specDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(specDir, "xpu.yaml"), []byte(testSpec("a", "0")), 0o644))

	t.Run("entry writable by others", func(t *testing.T) {
		c := cdiConfig(t, specDir)
		_, _, err := modify(t, c, "0")
		require.NoError(t, err)
		entries, _ := filepath.Glob(filepath.Join(c.CacheDir, "cdi-*.json"))
		require.Len(t, entries, 1)
		// What an attacker would plant: a mount of the host's root.
		data, err := os.ReadFile(entries[0])
		require.NoError(t, err)
		planted := strings.Replace(string(data), `"hostPath":"/a"`, `"hostPath":"/"`, 1)
		require.NotEqual(t, string(data), planted)
		require.NoError(t, os.WriteFile(entries[0], []byte(planted), 0o600))
		require.NoError(t, os.Chmod(entries[0], 0o666))

		got, log, err := modify(t, c, "0")
		require.NoError(t, err)
		require.True(t, log.Has("not owned by the shim's user or writable by others"), log.Lines())
		require.False(t, log.Has("spec cache hit"))
		require.Equal(t, "/a", mountSource(got, "/a"))
		// The miss replaced the entry with a private one.
		st, err := os.Stat(entries[0])
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	})
	t.Run("directory writable by others", func(t *testing.T) {
		c := cdiConfig(t, specDir)
		require.NoError(t, os.Mkdir(c.CacheDir, 0o777))
		require.NoError(t, os.Chmod(c.CacheDir, 0o777))
		for range 2 {
			_, log, err := modify(t, c, "0")
			require.NoError(t, err)
			require.True(t, log.Has("spec cache not written"), log.Lines())
			require.False(t, log.Has("spec cache hit"))
		}
		entries, _ := filepath.Glob(filepath.Join(c.CacheDir, "*"))
		require.Empty(t, entries)
	})
	t.Run("entry is a symlink", func(t *testing.T) {
		c := cdiConfig(t, specDir)
		_, _, err := modify(t, c, "0")
		require.NoError(t, err)
		entries, _ := filepath.Glob(filepath.Join(c.CacheDir, "cdi-*.json"))
		require.Len(t, entries, 1)
		elsewhere := filepath.Join(t.TempDir(), "entry.json")
		require.NoError(t, os.Rename(entries[0], elsewhere))
		require.NoError(t, os.Symlink(elsewhere, entries[0]))
		_, log, err := modify(t, c, "0")
		require.NoError(t, err)
		require.False(t, log.Has("spec cache hit"), "a symlinked entry is not followed")
	})
	t.Run("entry is not JSON", func(t *testing.T) {
		c := cdiConfig(t, specDir)
		_, _, err := modify(t, c, "0")
		require.NoError(t, err)
		entries, _ := filepath.Glob(filepath.Join(c.CacheDir, "cdi-*.json"))
		data, err := os.ReadFile(entries[0])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(entries[0], data[:len(data)-2], 0o600), "the snapshot is intact, the JSON after it cut")
		got, log, err := modify(t, c, "0")
		require.NoError(t, err)
		require.True(t, log.Has("spec cache not used"), log.Lines())
		require.Contains(t, got.Process.Env, "DEV_0=a")
		_, log, err = modify(t, c, "0")
		require.NoError(t, err)
		require.True(t, log.Has("spec cache hit"), "the broken entry was replaced")
	})
}

func mountSource(s *oci.Spec, dst string) string {
	for _, m := range s.Mounts {
		if m.Destination == dst {
			return m.Source
		}
	}
	return ""
}

func TestSpecCacheOff(t *testing.T) {
	specDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(specDir, "xpu.yaml"), []byte(testSpec("a", "0")), 0o644))
	c := cdiConfig(t, specDir)
	c.CacheDir = ""
	for range 2 {
		got, log, err := modify(t, c, "0")
		require.NoError(t, err)
		require.False(t, log.Has("spec cache"))
		require.Contains(t, got.Process.Env, "DEV_0=a")
	}
}

func TestSpecCacheParallelMisses(t *testing.T) {
	specDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(specDir, "xpu.yaml"), []byte(testSpec("a", "0", "1")), 0o644))
	c := cdiConfig(t, specDir)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _, err := modify(t, c, "1")
			if err == nil && !strings.Contains(strings.Join(got.Process.Env, " "), "DEV_1=a") {
				err = fmt.Errorf("container %d did not get device 1: %v", i, got.Process.Env)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	entries, _ := filepath.Glob(filepath.Join(c.CacheDir, "*"))
	require.Len(t, entries, 1, "one entry, no temporary file left: %v", entries)
}

// deviceBlobs maps each device of an entry to the encodings of its spec's
// edits and of its own.
func deviceBlobs(t *testing.T, e *specCacheEntry) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for q, i := range e.Devices {
		s, err := e.Specs[i[0]].encoded()
		require.NoError(t, err)
		d, err := e.Edits[i[1]].encoded()
		require.NoError(t, err)
		out[q] = [2]string{string(s), string(d)}
	}
	return out
}

func TestSpecCacheEntryStoresSharedEditsOnce(t *testing.T) {
	same := &specs.ContainerEdits{Env: []string{"B=1"}}
	e := &specCacheEntry{
		Devices: map[string][2]int{"vendor.test/xpu=0": {0, 0}, "vendor.test/xpu=0000:01:00.0": {0, 1}, "vendor.test/xpu=1": {0, 2}},
		Specs:   []lazyEdits{{edits: &specs.ContainerEdits{Env: []string{"A=1"}}}},
		Edits:   []lazyEdits{{edits: same}, {edits: &specs.ContainerEdits{Env: []string{"B=1"}}}, {edits: &specs.ContainerEdits{Env: []string{"C=1"}}}},
	}
	data, err := e.encode()
	require.NoError(t, err)
	got, err := decodeEntry(data, "vendor.test/xpu")
	require.NoError(t, err)
	require.Len(t, got.Edits, 2, "the two names of one device share their edits")
	require.Equal(t, deviceBlobs(t, e), deviceBlobs(t, got))
	edits, err := got.Edits[got.Devices["vendor.test/xpu=1"][1]].get()
	require.NoError(t, err)
	require.Equal(t, []string{"C=1"}, edits.Env)
}

func FuzzDecodeEntry(f *testing.F) {
	e := &specCacheEntry{
		Errors:  []string{"x"},
		Devices: map[string][2]int{"vendor.test/xpu=0": {0, 0}, "vendor.test/xpu=all": {0, 1}},
		Specs:   []lazyEdits{{raw: []byte(`{"env":["A=1"]}`)}},
		Edits:   []lazyEdits{{raw: []byte(`{"env":["B=1"]}`)}, {raw: []byte(`{}`)}},
	}
	good, err := e.encode()
	require.NoError(f, err)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeEntry(data, "vendor.test/xpu")
		if err != nil {
			return
		}
		again, err := e.encode()
		require.NoError(t, err)
		e2, err := decodeEntry(again, "vendor.test/xpu")
		require.NoError(t, err)
		require.Equal(t, deviceBlobs(t, e), deviceBlobs(t, e2))
	})
}

func TestSpecCacheCoversTheLibrarysDefaultDirectories(t *testing.T) {
	// spec-dirs = [] makes the library read its default directories; the
	// snapshot must cover them, or a change there would not be seen.
	c := newSpecCache(t.TempDir(), "vendor.test/xpu", nil)
	require.Equal(t, cdiapi.DefaultSpecDirs, c.dirs)
}

// TestSpecCacheEntryIsOfWhatWasRead: the spec files are read once, and the
// entry's snapshot and edits are both of those bytes: a file changed after
// the read neither reaches this container nor pairs with the old snapshot.
func TestSpecCacheEntryIsOfWhatWasRead(t *testing.T) {
	specDir := t.TempDir()
	spec := filepath.Join(specDir, "xpu.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(testSpec("a", "0")), 0o644))
	c := cdiConfig(t, specDir)

	// Read "a", then "b" is written before the resolution.
	dir, _ := writeBundle(t, bundleSpec(false, map[string]string{"cdi.k8s.io/t": "vendor.test/xpu=0"}))
	_, err := ModifyBundle(dir, c, Settings{
		beforeParse: func() { require.NoError(t, os.WriteFile(spec, []byte(testSpec("b", "0")), 0o644)) },
	})
	require.NoError(t, err)
	require.Contains(t, readBundle(t, dir).Process.Env, "DEV_0=a", "the container gets what was read")

	// "b" on disk: a miss that resolves "b", not a hit on a's edits.
	got, log, err := modify(t, c, "0")
	require.NoError(t, err)
	require.False(t, log.Has("spec cache hit"))
	require.Contains(t, got.Process.Env, "DEV_0=b")

	// Back to "a": what was stored for "a" is a's.
	require.NoError(t, os.WriteFile(spec, []byte(testSpec("a", "0")), 0o644))
	got, _, err = modify(t, c, "0")
	require.NoError(t, err)
	require.Contains(t, got.Process.Env, "DEV_0=a")
}

// TestSpecCacheHostileSpecFiles: a FIFO named other.yaml or a link to
// /dev/zero in a spec directory neither blocks a create nor stops the
// other specs from resolving; no entry is stored for such a directory.
func TestSpecCacheHostileSpecFiles(t *testing.T) {
	for _, tc := range fdiotest.HostileFiles() {
		t.Run(tc.Description, func(t *testing.T) {
			specDir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(specDir, "xpu.yaml"), []byte(testSpec("a", "0")), 0o644))
			require.NoError(t, tc.Plant(filepath.Join(specDir, "other.yaml")))
			c := cdiConfig(t, specDir)
			type result struct {
				got *oci.Spec
				err error
			}
			r := fdiotest.Within(t, "a create", func() result {
				got, _, err := modify(t, c, "0")
				return result{got, err}
			})
			require.NoError(t, r.err)
			require.Contains(t, r.got.Process.Env, "DEV_0=a")
			entries, _ := filepath.Glob(filepath.Join(c.CacheDir, "cdi-*.json"))
			require.Empty(t, entries)
		})
	}
}
