package discover

import (
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

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
	seen := map[string]bool{} // host paths already taken
	for _, dir := range s.xreDirs {
		libs, err := s.scanDir(dir)
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
		host, err := lookup.Resolve(s.root, inRoot)
		if err != nil || seen[host] || !isRegular(host) {
			continue
		}
		seen[host] = true
		h.Libraries = append(h.Libraries, DriverFile{Kind: KindLibrary, Path: inRoot, HostPath: host, Soname: name})
	}
	if !h.hasLibrary(RuntimeLibrary) {
		h.warnf("driver library %s not found under driver root %s (looked in %s and %s): containers get device nodes only and must bring their own XRE",
			RuntimeLibrary, s.root, strings.Join(s.xreDirs, ", "), lookup.CachePath)
	}

	if tool, ok := s.findTool(); ok {
		h.Tools = append(h.Tools, tool)
	} else {
		h.warnf("xpu-smi not found under driver root %s (looked for %s)", s.root, strings.Join(s.toolPaths, ", "))
	}
	return nil
}

// findTool returns xpu-smi from the first of the tool paths that holds an
// executable file.
func (s *driverSource) findTool() (DriverFile, bool) {
	loc := lookup.NewExecutableLocator(s.root)
	for _, p := range s.toolPaths {
		found, err := loc.Locate(p)
		if err != nil {
			continue
		}
		host, err := lookup.Resolve(s.root, found[0])
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

func isRegular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// scanDir lists the shared libraries of one in-root directory: each real
// ELF file with a SONAME becomes one library at <dir>/<SONAME>, the other
// names of the directory pointing at the same file become its links.
func (s *driverSource) scanDir(dir string) ([]DriverFile, error) {
	hostDir, err := lookup.Resolve(s.root, dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(hostDir)
	if err != nil {
		return nil, err
	}
	type file struct {
		host  string
		names []string
	}
	files := map[string]*file{}
	var order []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "lib") || !strings.Contains(name, ".so") {
			continue
		}
		host := filepath.Join(hostDir, name)
		if e.Type()&os.ModeSymlink != 0 {
			if host, err = lookup.Resolve(s.root, path.Join(dir, name)); err != nil {
				continue
			}
		} else if !e.Type().IsRegular() {
			continue
		}
		f, ok := files[host]
		if !ok {
			f = &file{host: host}
			files[host] = f
			order = append(order, host)
		}
		f.names = append(f.names, name)
	}
	var libs []DriverFile
	for _, host := range order {
		f := files[host]
		soname, err := readSoname(host)
		if err != nil {
			s.log.Debugf("%v; not a library", err)
			continue
		}
		if soname == "" || strings.ContainsRune(soname, '/') {
			s.log.Debugf("%s: unusable SONAME %q; not a library", host, soname)
			continue
		}
		lib := DriverFile{Kind: KindLibrary, Path: path.Join(dir, soname), HostPath: host, Soname: soname}
		real := filepath.Base(host)
		for _, n := range f.names {
			if n != soname && (n != real || filepath.Dir(host) != hostDir) {
				lib.Links = append(lib.Links, n)
			}
		}
		sort.Strings(lib.Links)
		libs = append(libs, lib)
	}
	return libs, nil
}
