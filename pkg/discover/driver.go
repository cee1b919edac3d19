package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/lookup"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// RuntimeFamily names the XRE runtime every XPU program links against:
// libxpurt.so.1 on XRE 4, libxpurt.so.2 on XRE 5; any major is accepted.
const RuntimeFamily = "libxpurt.so"

// xreLink is the version link of an XRE install
// (/usr/local/xpu -> /usr/local/xpu-<version>).
const xreLink = "/usr/local/xpu"

// ToolPath is where xpu-smi is put in containers: /usr/bin is on every
// default PATH, even of images that leave out /usr/local/bin.
const ToolPath = "/usr/bin/xpu-smi"

// ToolAlias is the older name of xpu-smi, linked next to it.
const ToolAlias = "xpu_smi"

// cacheLibraryPrefixes name the driver libraries that are also looked up
// through the driver root's ld.so.cache: the XRE libraries, for XRE
// installs outside /usr/local/xpu, and libxpunvidia-ml, which XRE 5 puts in
// the system library directory (xpu-smi 5.x needs it). The CUDA-compatible
// layers (libcuda, libcudart) are deliberately not here: they are taken
// from the XRE directories only, never from a system directory where they
// would be another vendor's.
var cacheLibraryPrefixes = []string{
	"libxpurt.so", "libxpuml.so", "libpcida.so", "libxpuapi.so", "libbkcl.so", "libxft.so", "libxpunvidia-ml.so",
}

// driverSource finds the XRE libraries and tools below the driver root.
type driverSource struct {
	root      string
	xreDirs   []string
	toolPaths []string
	log       logger.Interface
	// arch is the machine the libraries must be for; nil: any.
	arch *elfso.Arch
	// rejected are the host paths of the XRE files left out with a
	// warning (not usable, another machine's): the loader cache naming
	// them does not bring them back.
	rejected map[string]bool
}

var _ source = (*driverSource)(nil)

// newDriverSource returns the Source of driver files: the shared libraries of
// the XRE library directories (xreDirs, in-root paths, searched in order:
// a library family found in one directory is not taken from a later one),
// the driver libraries the root's ld.so.cache knows, and the first xpu-smi
// of toolPaths. With arch, libraries of other machines are left out.
func newDriverSource(root string, xreDirs, toolPaths []string, log logger.Interface, arch *elfso.Arch) source {
	return &driverSource{root: root, xreDirs: xreDirs, toolPaths: toolPaths, log: logger.OrDiscard(log), arch: arch}
}

// archFilter is the machine the options say the driver root's libraries
// are for, or nil where none is known (a build for another machine than
// elfso.Arches, without WithArch).
func archFilter(o *options) *elfso.Arch {
	if !o.archSet {
		return nil
	}
	a := o.arch
	return &a
}

// family is the name of a library without its version: libxpurt.so for
// libxpurt.so.2, libcudart.so for libcudart.so.12.
func family(soname string) string {
	if i := strings.Index(soname, ".so"); i >= 0 {
		return soname[:i+3]
	}
	return soname
}

func (s *driverSource) Discover(h *Host) error {
	// One resolver for the whole discovery: the XRE directories, the
	// libraries' links, the cache entries and the tool paths share their
	// leading components, which are looked at once.
	res := lookup.NewResolver(s.root)
	s.rejected = map[string]bool{}
	s.readXRELink(h, res)
	seen := map[string]bool{}    // host paths already taken
	owner := map[string]string{} // library family -> directory that supplies it
	var leftOut []string         // notes on the libraries not taken, in order
	for _, dir := range s.xreDirs {
		libs, err := s.scanDir(h, res, dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				s.log.Debugf("XRE library dir %s: %v", dir, err)
			} else {
				h.warnf("XRE library directory %s under driver root %s cannot be read (%v): its libraries are left out", dir, s.root, err)
			}
			continue
		}
		mine := map[string]bool{}
		for _, l := range libs {
			fam := family(l.Soname)
			if o, ok := owner[fam]; ok && o != dir {
				if !seen[l.HostPath] { // not just another name of a file taken
					leftOut = append(leftOut, fmt.Sprintf("%s left out: %s comes from %s, which is searched first (one version of each library)", l.Path, fam, o))
				}
				continue
			}
			mine[fam] = true
			if !seen[l.HostPath] {
				seen[l.HostPath] = true
				h.Libraries = append(h.Libraries, l)
			}
		}
		for fam := range mine {
			owner[fam] = dir
		}
	}
	leftOut = s.cacheLibraries(h, res, seen, owner, leftOut)
	s.noteRuntime(h, owner)
	h.Notes = append(h.Notes, leftOut...)

	if tool, ok := s.findTool(res); ok {
		h.Tools = append(h.Tools, tool)
	} else {
		h.warnf("xpu-smi not found under driver root %s (looked for %s)", s.root, strings.Join(s.toolPaths, ", "))
	}
	return nil
}

// readXRELink records where the XRE version link leads, and warns when it
// leads nowhere.
func (s *driverSource) readXRELink(h *Host, res *lookup.Resolver) {
	uses := false
	for _, d := range s.xreDirs {
		if d == xreLink || strings.HasPrefix(d, xreLink+"/") {
			uses = true
		}
	}
	if !uses {
		return
	}
	fi, err := os.Lstat(filepath.Join(s.root, xreLink))
	if err != nil {
		s.log.Debugf("XRE link %s: %v", xreLink, err)
		return
	}
	host, err := res.Resolve(xreLink)
	if err != nil {
		h.warnf("XRE link %s under driver root %s cannot be resolved (%v): no XRE libraries from it", xreLink, s.root, err)
		return
	}
	target := s.inRoot(host)
	if st, err := os.Stat(host); err != nil || !st.IsDir() {
		var what string
		switch {
		case err == nil:
			what = "is not a directory"
		case errors.Is(err, fs.ErrNotExist):
			what = "does not exist"
		default:
			what = fmt.Sprintf("cannot be read (%v)", err)
		}
		h.warnf("XRE link %s under driver root %s points to %s, which %s: no XRE libraries from it (reinstall the XRE or fix the link)", xreLink, s.root, target, what)
		return
	}
	h.XRELink = xreLink
	if fi.Mode()&os.ModeSymlink != 0 {
		h.XRETarget = target
	}
}

// inRoot returns the in-root path of a host path below the root.
func (s *driverSource) inRoot(host string) string {
	rel, err := filepath.Rel(s.root, host)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return host
	}
	return path.Clean("/" + filepath.ToSlash(rel))
}

// cacheLibraries adds the driver libraries of the root's ld.so.cache whose
// family no XRE directory supplied. A library in another version
// directory than the one /usr/local/xpu names (a leftover of an upgrade)
// is left out.
func (s *driverSource) cacheLibraries(h *Host, res *lookup.Resolver, seen map[string]bool, owner map[string]string, leftOut []string) []string {
	cache := lookup.NewLdcacheLocator(s.root)
	if s.arch != nil {
		cache = lookup.NewLdcacheLocatorFor(s.root, *s.arch)
	}
	entries, err := cache.Entries()
	if err != nil {
		s.log.Debugf("driver root ld.so.cache: %v", err)
	}
	sonames := make([]string, 0, len(entries))
	for name := range entries {
		if isCacheLibrary(name) {
			sonames = append(sonames, name)
		}
	}
	sort.Strings(sonames)
	for _, name := range sonames {
		inRoot := entries[name][0]
		host, err := res.Resolve(inRoot)
		if err != nil || seen[host] || s.rejected[host] || !isRegular(res, host) {
			continue
		}
		fam := family(name)
		if o, ok := owner[fam]; ok {
			leftOut = append(leftOut, fmt.Sprintf("%s (ld.so.cache) left out: %s comes from %s (one version of each library)", inRoot, fam, o))
			continue
		}
		if h.XRETarget != "" {
			if dir := versionDir(s.inRoot(host)); dir != "" && dir != h.XRETarget {
				leftOut = append(leftOut, fmt.Sprintf("%s (ld.so.cache) left out: it is in %s, a stale XRE version directory (%s names %s)", inRoot, dir, xreLink, h.XRETarget))
				continue
			}
		}
		seen[host] = true
		lib := DriverFile{Kind: KindLibrary, Path: inRoot, HostPath: host, Soname: name, FromLoaderCache: true}
		// A system library is a SONAME link to a versioned file: the
		// container gets both names, as the host has them.
		if real := filepath.Base(host); real != path.Base(inRoot) {
			lib.AlsoAt = []string{path.Join(path.Dir(inRoot), real)}
		}
		h.Libraries = append(h.Libraries, lib)
		owner[fam] = lookup.CachePath
	}
	return leftOut
}

// versionDir returns the /usr/local/xpu-<version> directory an in-root path
// is in, or "".
func versionDir(p string) string {
	rest, ok := strings.CutPrefix(p, "/usr/local/xpu-")
	if !ok {
		return ""
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return "/usr/local/xpu-" + rest
}

// noteRuntime says which runtime library the spec carries and why, or
// warns that there is none.
func (s *driverSource) noteRuntime(h *Host, owner map[string]string) {
	var runtime []string
	for _, l := range h.Libraries {
		if family(l.Soname) == RuntimeFamily {
			runtime = append(runtime, l.Path)
		}
	}
	if len(runtime) == 0 {
		h.warnf("driver library %s.N not found under driver root %s (looked in %s and %s): containers get device nodes only and must bring their own XRE",
			RuntimeFamily, s.root, strings.Join(s.xreDirs, ", "), lookup.CachePath)
		return
	}
	why := owner[RuntimeFamily] + " is the first of " + strings.Join(s.xreDirs, ", ") + " that has it"
	if owner[RuntimeFamily] == lookup.CachePath {
		why = "from " + lookup.CachePath + ": no XRE directory has it"
	}
	if h.XRETarget != "" {
		why += "; " + xreLink + " -> " + h.XRETarget
	}
	h.notef("runtime library: %s (%s)", strings.Join(runtime, ", "), why)
}

// findTool returns xpu-smi from the first of the tool paths (in-root, links
// resolved inside the root) that is a regular file with an execute bit.
func (s *driverSource) findTool(res *lookup.Resolver) (DriverFile, bool) {
	for _, p := range s.toolPaths {
		host, err := res.Resolve(p)
		if err != nil {
			continue
		}
		if st, err := res.Stat(host); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			continue
		}
		return DriverFile{Kind: KindTool, Path: ToolPath, HostPath: host, Links: []string{ToolAlias}}, true
	}
	return DriverFile{}, false
}

func isCacheLibrary(soname string) bool {
	for _, p := range cacheLibraryPrefixes {
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
//
// What cannot be used is left out with a warning naming it: a dangling
// link, a file that cannot be opened, an ELF file without a usable SONAME.
// Files that are not ELF at all (linker scripts, notes) are skipped quietly.
func (s *driverSource) scanDir(h *Host, res *lookup.Resolver, dir string) ([]DriverFile, error) {
	hostDir, err := res.Resolve(dir)
	if err != nil {
		return nil, err
	}
	d, err := elfso.OpenLibDir(hostDir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }() // read-only
	entries, _, err := d.Entries(0)
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
				h.warnf("driver library %s under driver root %s: %v; left out", path.Join(dir, name), s.root, err)
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
	libs := make([]DriverFile, 0, len(order))
	for _, f := range order {
		var ef *fdio.File
		if f.entry != "" {
			ef, err = d.Open(f.entry)
		} else {
			ef, err = fdio.Open(unix.AT_FDCWD, f.host, f.host, 0)
		}
		var (
			info  elfso.Info
			isELF bool
		)
		if err != nil {
			if f.entry == "" && errors.Is(err, fs.ErrNotExist) {
				h.warnf("driver library link %s under driver root %s is dangling (its target %s does not exist); left out", path.Join(dir, f.names[0]), s.root, s.inRoot(f.host))
			} else {
				h.warnf("driver library %s under driver root %s cannot be opened (%v); left out", path.Join(dir, f.names[0]), s.root, err)
			}
			continue
		}
		info, isELF, err = d.ReadOpenInfo(ef, f.host)
		if err != nil {
			if isELF {
				s.rejected[f.host] = true
				h.warnf("driver library %s under driver root %s is not a usable shared library (%v): a library needs a SONAME; left out", path.Join(dir, f.names[0]), s.root, err)
			} else {
				s.log.Debugf("%v; not a library", err)
			}
			continue
		}
		// The loader of the containers would skip it (and a cache entry
		// the hook writes for it): a library of another machine is a
		// broken install, not a library to hand out.
		if s.arch != nil && info.Machine != s.arch.Machine {
			s.rejected[f.host] = true
			name := f.names[0]
			if f.entry != "" {
				name = f.entry // the file itself, not one of its links
			}
			h.warnf("driver library %s under driver root %s is built for %s, not for this host's %s (%s); left out",
				path.Join(dir, name), s.root, elfso.MachineName(info.Machine), elfso.MachineName(s.arch.Machine), s.arch.GOARCH)
			continue
		}
		soname := info.Soname
		if strings.ContainsRune(soname, '/') {
			h.warnf("driver library %s under driver root %s has an unusable SONAME %q; left out", path.Join(dir, f.names[0]), s.root, soname)
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
