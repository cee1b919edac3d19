package discover

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/pkg/ldcache"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
	"github.com/xpu-cdi/xpu-cdi/pkg/lookup"
)

// RuntimeLibrary is the XRE runtime every XPU program links against.
const RuntimeLibrary = "libxpurt.so.1"

// ToolPath is where xpu-smi is put in containers: /usr/bin is on every
// default PATH, even of images that leave out /usr/local/bin.
const ToolPath = "/usr/bin/xpu-smi"

// ToolAlias is the older name of xpu-smi, linked next to it.
const ToolAlias = "xpu_smi"

// xreLibraryPrefixes name the XRE libraries that are also looked up through
// the driver root's ld.so.cache, for XRE installs outside /usr/local/xpu.
var xreLibraryPrefixes = []string{
	"libxpurt.so", "libxpuml.so", "libpcida.so", "libxpuapi.so", "libbkcl.so", "libxft.so",
}

// driverSource finds the XRE libraries and tools below the driver root.
type driverSource struct {
	root      string
	xreDirs   []string
	toolPaths []string
	log       logger.Interface
}

var _ Source = (*driverSource)(nil)

// NewDriverSource returns the Source of driver files: the shared libraries of
// the XRE library directories (xreDirs, in-root paths), the XRE libraries the
// root's ld.so.cache knows, and the first xpu-smi of toolPaths.
func NewDriverSource(root string, xreDirs, toolPaths []string, log logger.Interface) Source {
	return &driverSource{root: root, xreDirs: xreDirs, toolPaths: toolPaths, log: logger.OrDiscard(log)}
}

func (s *driverSource) Discover(h *Host) error {
	// One resolver for the whole discovery: the XRE directories, the
	// libraries' links, the cache entries and the tool paths share their
	// leading components, which are looked at once.
	res := lookup.NewResolver(s.root)
	seen := map[string]bool{} // host paths already taken
	for _, dir := range s.xreDirs {
		libs, err := s.scanDir(res, dir)
		if err != nil {
			s.log.Debugf("XRE library dir %s: %v", dir, err)
			continue
		}
		for _, l := range libs {
			if !seen[l.HostPath] {
				seen[l.HostPath] = true
				h.Libraries = append(h.Libraries, l)
			}
		}
	}
	cache := lookup.NewLdcacheLocator(s.root)
	entries, err := cache.Entries()
	if err != nil {
		s.log.Debugf("driver root ld.so.cache: %v", err)
	}
	sonames := make([]string, 0, len(entries))
	for name := range entries {
		if isXRELibrary(name) {
			sonames = append(sonames, name)
		}
	}
	sort.Strings(sonames)
	for _, name := range sonames {
		inRoot := entries[name][0]
		host, err := res.Resolve(inRoot)
		if err != nil || seen[host] || !isRegular(res, host) {
			continue
		}
		seen[host] = true
		h.Libraries = append(h.Libraries, DriverFile{Kind: KindLibrary, Path: inRoot, HostPath: host, Soname: name})
	}
	if !h.hasLibrary(RuntimeLibrary) {
		h.warnf("driver library %s not found under driver root %s (looked in %s and %s): containers get device nodes only and must bring their own XRE",
			RuntimeLibrary, s.root, strings.Join(s.xreDirs, ", "), lookup.CachePath)
	}

	if tool, ok := s.findTool(res); ok {
		h.Tools = append(h.Tools, tool)
	} else {
		h.warnf("xpu-smi not found under driver root %s (looked for %s)", s.root, strings.Join(s.toolPaths, ", "))
	}
	return nil
}

// findTool returns xpu-smi from the first of the tool paths that holds an
// executable file.
func (s *driverSource) findTool(res *lookup.Resolver) (DriverFile, bool) {
	loc := res.ExecutableLocator()
	for _, p := range s.toolPaths {
		found, err := loc.Locate(p)
		if err != nil {
			continue
		}
		host, err := res.Resolve(found[0])
		if err != nil {
			continue
		}
		return DriverFile{Kind: KindTool, Path: ToolPath, HostPath: host, Links: []string{ToolAlias}}, true
	}
	return DriverFile{}, false
}

func (h *Host) hasLibrary(soname string) bool {
	for _, l := range h.Libraries {
		if l.Soname == soname {
			return true
		}
	}
	return false
}

func isXRELibrary(soname string) bool {
	for _, p := range xreLibraryPrefixes {
		if strings.HasPrefix(soname, p) {
			return true
		}
	}
	return false
}

func isRegular(res *lookup.Resolver, p string) bool {
	st, err := res.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// scanDir lists the shared libraries of one in-root directory: each real
// ELF file with a SONAME becomes one library at <dir>/<SONAME>, the other
// names of the directory pointing at the same file become its links.
//
// An XRE directory has hundreds of files, so the per-file work is kept
// small: the directory is resolved and opened once and its regular files
// are opened by name in it (O_NOFOLLOW), symlinks alone are resolved inside
// the root one by one; the SONAMEs are read with one reader's buffers.
func (s *driverSource) scanDir(res *lookup.Resolver, dir string) ([]DriverFile, error) {
	hostDir, err := res.Resolve(dir)
	if err != nil {
		return nil, err
	}
	d, err := openLibDir(hostDir)
	if err != nil {
		return nil, err
	}
	defer d.close()
	entries, err := d.entries()
	if err != nil {
		return nil, err
	}
	hostJoin, inRootJoin := newJoiner(hostDir), newJoiner(dir)
	type file struct {
		host  string
		entry string // the file's own name in the directory, "" if reached by symlinks only
		names []string
	}
	files := make(map[string]*file, len(entries))
	var order []*file
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "lib") || !strings.Contains(name, ".so") {
			continue
		}
		var host, entry string
		switch t := e.Type(); {
		case t&os.ModeSymlink != 0:
			if host, err = res.Resolve(path.Join(dir, name)); err != nil {
				continue
			}
		case t.IsRegular():
			host, entry = hostJoin.join(name), name
		default:
			continue
		}
		f, ok := files[host]
		if !ok {
			f = &file{host: host}
			files[host] = f
			order = append(order, f)
		}
		if entry != "" {
			f.entry = entry
		}
		f.names = append(f.names, name)
	}
	r := new(ldcache.SonameReader)
	libs := make([]DriverFile, 0, len(order))
	for _, f := range order {
		var ef elfReader
		if f.entry != "" {
			ef, err = d.openFile(f.entry, f.host)
		} else {
			ef, err = openELF(f.host)
		}
		var soname string
		if err == nil {
			soname, err = readSoname(r, ef, f.host)
		}
		if err != nil {
			s.log.Debugf("%v; not a library", err)
			continue
		}
		if strings.ContainsRune(soname, '/') {
			s.log.Debugf("%s: unusable SONAME %q; not a library", f.host, soname)
			continue
		}
		lib := DriverFile{Kind: KindLibrary, Path: inRootJoin.join(soname), HostPath: f.host, Soname: soname}
		real := filepath.Base(f.host)
		for _, n := range f.names {
			if n != soname && (n != real || dirOf(f.host) != hostDir) {
				lib.Links = append(lib.Links, n)
			}
		}
		sort.Strings(lib.Links)
		libs = append(libs, lib)
	}
	if len(libs) == 0 {
		return nil, nil
	}
	return libs, nil
}

// elfReader is an open library file, read with preads.
type elfReader interface {
	io.ReaderAt
	io.Closer
}

// readSoname returns the SONAME of the library f, opened from path (which
// errors name), and closes f.
func readSoname(r *ldcache.SonameReader, f elfReader, path string) (string, error) {
	defer func() { _ = f.Close() }() // read-only
	soname, _, err := r.Read(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return soname, nil
}

// joiner is path.Join(dir, name) for many names of one directory, without
// path.Clean's work where the result is plainly clean: dir absolute and
// clean, name one component.
type joiner struct {
	dir   string
	plain bool // dir is absolute and clean
}

func newJoiner(dir string) joiner {
	return joiner{dir: dir, plain: path.IsAbs(dir) && path.Clean(dir) == dir}
}

func (j joiner) join(name string) string {
	if !j.plain || name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return path.Join(j.dir, name)
	}
	if j.dir == "/" {
		return "/" + name
	}
	return j.dir + "/" + name
}

// dirOf is filepath.Dir of a clean absolute path.
func dirOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
