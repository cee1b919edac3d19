package runtimeconfig

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// The CRI plugin that holds runtimes and CDI settings, per config version
// (containerd docs/cri/config.md):
//
//	version 2 (containerd 1.7): plugins."io.containerd.grpc.v1.cri"
//	version 3 (containerd 2.x): plugins."io.containerd.cri.v1.runtime"
//
// Both have cdi_spec_dirs at the plugin's top level (version 2 also
// enable_cdi; containerd 2.x has CDI always on and no such key) and
// containerd.default_runtime_name / containerd.runtimes.<name> below it.
const (
	criPluginV2 = "io.containerd.grpc.v1.cri"
	criPluginV3 = "io.containerd.cri.v1.runtime"

	runcV2RuntimeType = "io.containerd.runc.v2"

	// cdiAnnotationsPattern is the container_annotations entry of the
	// runtime: the CDI annotation prefix, as a containerd wildcard.
	cdiAnnotationsPattern = "cdi.k8s.io/*"

	importsMarker = "# xpu-cdi: imports entry "
	newKeySuffix  = " (new key)"
)

// cdiEnabled reports whether a version 2 CRI plugin section enables CDI.
func cdiEnabled(section map[string]any) bool {
	v, ok := lookup(section, []string{"enable_cdi"})
	return ok && v == true
}

func criPlugin(version int) string {
	if version == 2 {
		return criPluginV2
	}
	return criPluginV3
}

// containerdVersion reads the config version of an existing main file.
func containerdVersion(path string, tree map[string]any) (int, error) {
	v, ok := tree["version"]
	if !ok {
		return 0, fmt.Errorf("%s has no version key, which containerd reads as config version 1: "+
			"version 1 is not supported (containerd 2.x no longer reads it either); convert it with "+
			"`containerd config migrate` (containerd 2.x) or rewrite it as version 2: %w", path, ErrUnsupportedVersion)
	}
	n, ok := v.(int64)
	if !ok || (n != 2 && n != 3) {
		return 0, fmt.Errorf("%s: version = %v: want 2 (containerd 1.7) or 3 (containerd 2.x): %w", path, v, ErrUnsupportedVersion)
	}
	return int(n), nil
}

// containerdDropIn builds the drop-in tree. Before containerd 2.0 (#9982)
// an imported file replaces a whole plugin section of the main file rather
// than merging with it; the drop-in therefore starts from a copy of the main
// file's CRI plugin section, so that nothing the main file sets there is
// lost, and adds the runtime on top.
func (c *Configurator) containerdDropIn(mainPath string, mainTree map[string]any, version int) (map[string]any, error) {
	o := c.o
	plugin := criPlugin(version)
	section := map[string]any{}
	if v, ok := lookup(mainTree, []string{"plugins", plugin}); ok {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: plugins.%q is a %T, not a table: %w", mainPath, plugin, v, ErrParse)
		}
		section, _ = deepCopy(m).(map[string]any)
	}
	runtime := map[string]any{
		"runtime_type": runcV2RuntimeType,
		"options":      map[string]any{"BinaryName": o.runtimePath},
	}
	if version == 2 && !o.enableCDI && !cdiEnabled(section) {
		// The CRI plugin copies a container's annotations into the OCI
		// spec only for the keys its runtime lists: without this a
		// cdi.k8s.io annotation (the device plugin's cdi-annotations
		// strategy) never reaches the shim on containerd 1.6. Where the
		// CRI plugin resolves CDI itself (containerd 2.x, or enable_cdi)
		// it is left out: the shim would apply the same edits again, and
		// run the hook twice. Container annotations only: pod annotations
		// are written by pod authors (docs/security.md).
		runtime["container_annotations"] = stringList([]string{cdiAnnotationsPattern})
	}
	edits := []edit{{key: []string{"containerd", "runtimes", o.runtimeName}, value: runtime}}
	if _, ok := lookup(section, []string{"containerd", "runtimes", "runc"}); !ok && version == 2 && o.runtimeName != "runc" {
		// containerd < 2.0 decodes the drop-in's runtimes table over the
		// built-in one, which holds runc: a main file that relies on that
		// built-in entry (Debian's containerd 1.6 package ships one) would
		// lose runc, the default runtime, and every pod with it. The drop-in
		// carries the built-in entry.
		edits = append(edits, edit{key: []string{"containerd", "runtimes", "runc"}, value: map[string]any{"runtime_type": runcV2RuntimeType}})
	}
	if o.setAsDefault {
		edits = append(edits, edit{key: []string{"containerd", "default_runtime_name"}, value: o.runtimeName})
	}
	if o.enableCDI {
		// containerd 2.x always enables CDI in the CRI plugin: its config
		// struct has no enable_cdi (containerd 2.4 logs "Ignoring unknown
		// key ... enable_cdi"), so version 3 gets only the directories.
		if version == 2 {
			edits = append(edits, edit{key: []string{"enable_cdi"}, value: true})
		}
		edits = append(edits, edit{key: []string{"cdi_spec_dirs"}, value: stringList(o.cdiSpecDirs)})
	}
	for _, e := range edits {
		if err := set(section, e.key, e.value); err != nil {
			return nil, fmt.Errorf("%s, plugins.%q: %w", mainPath, plugin, err)
		}
	}
	return map[string]any{
		"version": int64(version),
		"plugins": map[string]any{plugin: section},
	}, nil
}

func (c *Configurator) configureContainerd(p *Plan) error {
	mainPath, dropIn := c.o.configPath, c.o.dropInPath
	old, err := readConfig(mainPath)
	if err != nil {
		return err
	}
	var (
		tree    map[string]any
		version = c.o.containerdVersion
	)
	if old != nil {
		if tree, err = parseTOML(mainPath, old); err != nil {
			return err
		}
		if version, err = containerdVersion(mainPath, tree); err != nil {
			return err
		}
	} else if version == 0 {
		return fmt.Errorf("%s does not exist, so the config version cannot be read from it: pass --containerd-config-version 2 (containerd 1.7) or 3 (containerd 2.x): %w",
			mainPath, ErrUnsupportedVersion)
	}
	dropTree, err := c.containerdDropIn(mainPath, tree, version)
	if err != nil {
		return err
	}
	dropChange, err := c.dropInChange(dropIn, dropTree)
	if err != nil {
		return err
	}
	// The drop-in carries a copy of the main file's CRI plugin section
	// (containerDropIn), registry credentials included on containerd 1.x
	// (registry.configs.*.auth): no more readable than the main file.
	dropChange.MaxPerm = permOf(mainPath)
	mainChange, err := containerdMainChange(mainPath, old, tree, version, dropIn)
	if err != nil {
		return err
	}
	// Drop-in first: the main file never imports a file that is not there.
	p.Changes = append(p.Changes, dropChange, mainChange)
	return nil
}

// minimalMain is the main file written when none exists. containerd runs
// with built-in defaults when its config file is missing; this file keeps
// those defaults (it sets nothing else) and adds the import.
func minimalMain(version int, dropIn string) ([]byte, error) {
	body, err := toml.Marshal(struct {
		Version int      `toml:"version"`
		Imports []string `toml:"imports"`
	}{version, []string{dropIn}})
	if err != nil {
		return nil, fmt.Errorf("encoding containerd config: %w", err)
	}
	head := "# Created by xpu-cdi runtime configure: containerd had no config file and used its built-in\n" +
		"# defaults, which still apply to everything not set here or in the imported files.\n" +
		"# `xpu-cdi runtime configure --revert` deletes this file as long as it is unchanged.\n"
	return append([]byte(head), body...), nil
}

func importsList(path string, tree map[string]any) ([]string, bool, error) {
	v, ok := tree["imports"]
	if !ok {
		return nil, false, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, true, fmt.Errorf("%s: imports is a %T, want an array of paths: %w", path, v, ErrParse)
	}
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		s, ok := x.(string)
		if !ok {
			return nil, true, fmt.Errorf("%s: imports holds %v (%T), want paths: %w", path, x, x, ErrParse)
		}
		out = append(out, s)
	}
	return out, true, nil
}

// importCovers reports whether an imports entry of the main file at mainPath
// loads dropIn. containerd resolves relative entries against the main file's
// directory and expands glob patterns.
func importCovers(mainPath, entry, dropIn string) bool {
	if !filepath.IsAbs(entry) {
		entry = filepath.Join(filepath.Dir(mainPath), entry)
	}
	if entry == dropIn {
		return true
	}
	ok, err := filepath.Match(entry, dropIn)
	return err == nil && ok
}

func markerLine(dropIn string, newKey bool) string {
	s := importsMarker + strconv.Quote(dropIn) + " added by `xpu-cdi runtime configure`; `--revert` removes it"
	if newKey {
		s += newKeySuffix
	}
	return s
}

func importsLine(entries []string) ([]byte, error) {
	b, err := toml.Marshal(map[string]any{"imports": entries})
	if err != nil {
		return nil, fmt.Errorf("encoding imports: %w", err)
	}
	return bytes.TrimRight(b, "\n"), nil
}

// topLevelKey finds the byte range of the top-level "name = value"
// expression in b.
func topLevelKey(b []byte, name string) (start, end int, found bool, err error) {
	var p unstable.Parser
	p.Reset(b)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			return 0, 0, false, nil
		case unstable.KeyValue:
			it := e.Key()
			var parts []string
			for it.Next() {
				parts = append(parts, string(it.Node().Data))
			}
			if len(parts) == 1 && parts[0] == name {
				return int(e.Raw.Offset), int(e.Raw.Offset + e.Raw.Length), true, nil
			}
		}
	}
	return 0, 0, false, p.Error()
}

func lineStart(b []byte, off int) int { return bytes.LastIndexByte(b[:off], '\n') + 1 }

// lineEnd returns the offset just past the newline ending the line at off
// (or len(b)).
func lineEnd(b []byte, off int) int {
	if i := bytes.IndexByte(b[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(b)
}

func splice(b []byte, start, end int, repl []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(repl))
	out = append(out, b[:start]...)
	out = append(out, repl...)
	return append(out, b[end:]...)
}

// containerdMainChange adds dropIn to the main file's imports by editing the
// text: the file is never re-encoded, so comments and layout are kept.
func containerdMainChange(mainPath string, old []byte, tree map[string]any, version int, dropIn string) (FileChange, error) {
	if old == nil {
		b, err := minimalMain(version, dropIn)
		return FileChange{Path: mainPath, New: b}, err
	}
	entries, hasKey, err := importsList(mainPath, tree)
	if err != nil {
		return FileChange{}, err
	}
	for _, e := range entries {
		if importCovers(mainPath, e, dropIn) {
			return FileChange{Path: mainPath, Old: old, New: old}, nil
		}
	}
	line, err := importsLine(append(entries, dropIn))
	if err != nil {
		return FileChange{}, err
	}
	marker := []byte(markerLine(dropIn, !hasKey) + "\n")
	var out []byte
	if hasKey {
		start, end, found, err := topLevelKey(old, "imports")
		if err != nil || !found {
			return FileChange{}, fmt.Errorf("%s: locating the imports key: %w", mainPath, errorOr(err, ErrParse))
		}
		out = splice(old, start, end, line)
		ls := lineStart(out, start)
		out = splice(out, ls, ls, marker)
	} else {
		_, end, found, err := topLevelKey(old, "version")
		if err != nil || !found {
			return FileChange{}, fmt.Errorf("%s: locating the version key: %w", mainPath, errorOr(err, ErrParse))
		}
		at := lineEnd(old, end)
		ins := append(marker, append(line, '\n')...)
		if at == len(old) && (len(old) == 0 || old[len(old)-1] != '\n') {
			// The file ends without a newline: keep it that way, so
			// that revert can restore it byte for byte.
			ins = append(append([]byte("\n"), marker...), line...)
		}
		out = splice(old, at, at, ins)
	}
	if err := checkImports(mainPath, tree, out, append(entries, dropIn)); err != nil {
		return FileChange{}, err
	}
	return FileChange{Path: mainPath, Old: old, New: out}, nil
}

// checkImports guards the text edit: out must decode to before with only
// imports changed to want (nil: imports removed).
func checkImports(path string, before map[string]any, out []byte, want []string) error {
	got, err := parseTOML(path+" (edited)", out)
	if err != nil {
		return err
	}
	exp := deepCopy(before).(map[string]any)
	if want == nil {
		delete(exp, "imports")
	} else {
		exp["imports"] = stringList(want)
	}
	if !reflect.DeepEqual(got, exp) {
		return fmt.Errorf("%s: editing the imports line would change other settings; add %q to imports by hand: %w",
			path, want, ErrParse)
	}
	return nil
}

func errorOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

func (c *Configurator) revertContainerd(p *Plan) error {
	mainPath, dropIn := c.o.configPath, c.o.dropInPath
	old, err := readConfig(mainPath)
	if err != nil {
		return err
	}
	if old != nil {
		tree, err := parseTOML(mainPath, old)
		if err != nil {
			return err
		}
		fc, err := containerdMainRevert(mainPath, old, tree, dropIn)
		if err != nil {
			return err
		}
		if fc != nil {
			p.Changes = append(p.Changes, *fc)
		} else if entries, _, _ := importsList(mainPath, tree); containsCover(mainPath, entries, dropIn) {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: the imports entry for %s was not added by xpu-cdi (no marker comment): left in place", mainPath, dropIn))
		}
	}
	rm, err := dropInRemoval(dropIn)
	if err != nil {
		return err
	}
	if rm != nil {
		p.Changes = append(p.Changes, *rm)
	}
	if len(p.Changes) == 0 {
		p.Notes = append(p.Notes, "containerd: nothing added by xpu-cdi found: nothing to revert")
	}
	return nil
}

func containsCover(mainPath string, entries []string, dropIn string) bool {
	for _, e := range entries {
		if importCovers(mainPath, e, dropIn) {
			return true
		}
	}
	return false
}

func containerdMainRevert(mainPath string, old []byte, tree map[string]any, dropIn string) (*FileChange, error) {
	if v, err := containerdVersion(mainPath, tree); err == nil {
		if minimal, err := minimalMain(v, dropIn); err == nil && bytes.Equal(minimal, old) {
			return &FileChange{Path: mainPath, Old: old}, nil
		}
	}
	markerAt := -1
	newKey := false
	for _, m := range []string{markerLine(dropIn, true), markerLine(dropIn, false)} {
		for off := 0; off < len(old); off = lineEnd(old, off) {
			if string(bytes.TrimRight(old[off:lineEnd(old, off)], "\r\n")) == m {
				markerAt, newKey = off, strings.HasSuffix(m, newKeySuffix)
				break
			}
		}
		if markerAt >= 0 {
			break
		}
	}
	if markerAt < 0 {
		return nil, nil
	}
	out := splice(old, markerAt, lineEnd(old, markerAt), nil)
	entries, _, err := importsList(mainPath, tree)
	if err != nil {
		return nil, err
	}
	var remaining []string
	for _, e := range entries {
		if e != dropIn {
			remaining = append(remaining, e)
		}
	}
	start, end, found, err := topLevelKey(out, "imports")
	if err != nil {
		return nil, fmt.Errorf("%s: locating the imports key: %w", mainPath, err)
	}
	var want []string
	switch {
	case !found:
		// Someone removed the key; only the marker goes.
		want = nil
	case newKey && len(remaining) == 0:
		cut := lineEnd(out, end)
		if cut == len(out) && (cut == 0 || out[cut-1] != '\n') && start > 0 && out[start-1] == '\n' {
			start-- // the line was added with a newline before it
		}
		out = splice(out, start, cut, nil)
	default:
		line, err := importsLine(remaining)
		if err != nil {
			return nil, err
		}
		out = splice(out, start, end, line)
		want = remaining
		if want == nil {
			want = []string{}
		}
	}
	if found {
		if err := checkImports(mainPath, tree, out, want); err != nil {
			return nil, err
		}
	}
	return &FileChange{Path: mainPath, Old: old, New: out}, nil
}
