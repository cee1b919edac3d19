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
	sc := s.newScan(h)
	s.readXRELink(h, sc.res)
	for _, dir := range s.xreDirs {
		sc.takeDir(dir)
	}
	sc.takeCacheLibraries()
	sc.noteRuntime()
	h.Notes = append(h.Notes, sc.leftOut...)

	if tool, ok := s.findTool(sc.res); ok {
		h.Tools = append(h.Tools, tool)
	} else {
		h.warnf("xpu-smi not found under driver root %s (looked for %s)", s.root, strings.Join(s.toolPaths, ", "))
	}
	return nil
}

// driverScan is one discovery's pass over the driver root. It owns what
// choosing the libraries keeps track of: which files were taken or
// rejected, which directory supplies each library family (one version of
// each), and the notes on what was left out.
type driverScan struct {
	*driverSource
	h *Host
	// res is the one resolver of the discovery: the XRE directories, the
	// libraries' links, the cache entries and the tool paths share their
	// leading components, which are looked at once.
	res *lookup.Resolver
	// taken are the host paths of the libraries taken.
	taken map[string]bool
	// rejected are the host paths of the XRE files left out with a
	// warning (not usable, another machine's): the loader cache naming
	// them does not bring them back.
	rejected map[string]bool
	// owner is the directory (or lookup.CachePath) that supplies each
	// library family.
	owner map[string]string
	// leftOut are the notes on the libraries not taken, in order.
	leftOut []string
}

func (s *driverSource) newScan(h *Host) *driverScan {
	return &driverScan{
		driverSource: s, h: h, res: lookup.NewResolver(s.root),
		taken: map[string]bool{}, rejected: map[string]bool{}, owner: map[string]string{},
	}
}

// takeDir takes the libraries of one XRE directory whose family no earlier
// directory supplied.
func (sc *driverScan) takeDir(dir string) {
	libs, err := sc.scanDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			sc.log.Debugf("XRE library dir %s: %v", dir, err)
		} else {
			sc.h.warnf("XRE library directory %s under driver root %s cannot be read (%v): its libraries are left out", dir, sc.root, err)
		}
		return
	}
	mine := map[string]bool{}
	for _, l := range libs {
		fam := family(l.Soname)
		if o, ok := sc.owner[fam]; ok && o != dir {
			if !sc.taken[l.HostPath] { // not just another name of a file taken
				sc.leftOut = append(sc.leftOut, fmt.Sprintf("%s left out: %s comes from %s, which is searched first (one version of each library)", l.Path, fam, o))
			}
			continue
		}
		mine[fam] = true
		if !sc.taken[l.HostPath] {
			sc.taken[l.HostPath] = true
			sc.h.Libraries = append(sc.h.Libraries, l)
		}
	}
	for fam := range mine {
		sc.owner[fam] = dir
	}
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

// takeCacheLibraries takes the driver libraries of the root's ld.so.cache
// whose family no XRE directory supplied. A library in another version
// directory than the one /usr/local/xpu names (a leftover of an upgrade)
// is left out.
func (sc *driverScan) takeCacheLibraries() {
	h := sc.h
	cache := lookup.NewLdcacheLocator(sc.root)
	if sc.arch != nil {
		cache = lookup.NewLdcacheLocatorFor(sc.root, *sc.arch)
	}
	entries, err := cache.Entries()
	if err != nil {
		sc.log.Debugf("driver root ld.so.cache: %v", err)
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
		host, err := sc.res.Resolve(inRoot)
		if err != nil || sc.taken[host] || sc.rejected[host] || !isRegular(sc.res, host) {
			continue
		}
		fam := family(name)
		if o, ok := sc.owner[fam]; ok {
			sc.leftOut = append(sc.leftOut, fmt.Sprintf("%s (ld.so.cache) left out: %s comes from %s (one version of each library)", inRoot, fam, o))
			continue
		}
		if h.XRETarget != "" {
			if dir := versionDir(sc.inRoot(host)); dir != "" && dir != h.XRETarget {
				sc.leftOut = append(sc.leftOut, fmt.Sprintf("%s (ld.so.cache) left out: it is in %s, a stale XRE version directory (%s names %s)", inRoot, dir, xreLink, h.XRETarget))
				continue
			}
		}
		sc.taken[host] = true
		lib := DriverFile{Kind: KindLibrary, Path: inRoot, HostPath: host, Soname: name, FromLoaderCache: true}
		// A system library is a SONAME link to a versioned file: the
		// container gets both names, as the host has them.
		if real := filepath.Base(host); real != path.Base(inRoot) {
			lib.AlsoAt = []string{path.Join(path.Dir(inRoot), real)}
		}
		h.Libraries = append(h.Libraries, lib)
		sc.owner[fam] = lookup.CachePath
	}
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
func (sc *driverScan) noteRuntime() {
	h, s, owner := sc.h, sc.driverSource, sc.owner
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
func (sc *driverScan) scanDir(dir string) ([]DriverFile, error) {
	hostDir, err := sc.res.Resolve(dir)
	if err != nil {
		return nil, err
	}
	d, err := elfso.OpenLibDir(hostDir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }() // read-only
	xd := &xreDir{LibDir: d, path: dir, host: hostDir, inRoot: newJoiner(dir)}
	files, err := sc.libraryFiles(xd)
	if err != nil {
		return nil, err
	}
	libs := make([]DriverFile, 0, len(files))
	for _, f := range files {
		if lib, ok := sc.readLibrary(xd, f); ok {
			libs = append(libs, lib)
		}
	}
	if len(libs) == 0 {
		return nil, nil
	}
	return libs, nil
}

// xreDir is one open XRE library directory.
type xreDir struct {
	*elfso.LibDir
	path   string // in-root
	host   string
	inRoot joiner // joins names to path
}

// libFile is one file of a library directory and its names there.
type libFile struct {
	host  string
	entry string // the file's own name in the directory, "" if reached by symlinks only
	names []string
}

// libraryFiles groups the library names of the directory d by the file
// they are, a symlink resolved inside the root, in the order of each
// file's first name. A link that cannot be resolved is left out with a
// warning.
func (sc *driverScan) libraryFiles(d *xreDir) ([]*libFile, error) {
	entries, _, err := d.Entries(0)
	if err != nil {
		return nil, err
	}
	dir, hostJoin := d.path, newJoiner(d.host)
	files := make(map[string]*libFile, len(entries))
	var order []*libFile
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "lib") || !strings.Contains(name, ".so") {
			continue
		}
		var host, entry string
		switch t := e.Type(); {
		case t&os.ModeSymlink != 0:
			if host, err = sc.res.Resolve(path.Join(dir, name)); err != nil {
				sc.h.warnf("driver library %s under driver root %s: %v; left out", path.Join(dir, name), sc.root, err)
				continue
			}
		case t.IsRegular():
			host, entry = hostJoin.join(name), name
		default:
			continue
		}
		f, ok := files[host]
		if !ok {
			f = &libFile{host: host}
			files[host] = f
			order = append(order, f)
		}
		if entry != "" {
			f.entry = entry
		}
		f.names = append(f.names, name)
	}
	return order, nil
}

// readLibrary makes the file f of the directory d a library at
// <dir>/<SONAME> whose links are its other names there. ok is false when it
// is left out: a warning says why, except for a file that is not ELF at
// all.
func (sc *driverScan) readLibrary(d *xreDir, f *libFile) (lib DriverFile, ok bool) {
	dir := d.path
	info, ok := sc.readInfo(d, f)
	if !ok {
		return DriverFile{}, false
	}
	// The loader of the containers would skip it (and a cache entry the
	// hook writes for it): a library of another machine is a broken
	// install, not a library to hand out.
	if sc.arch != nil && info.Machine != sc.arch.Machine {
		sc.rejected[f.host] = true
		name := f.names[0]
		if f.entry != "" {
			name = f.entry // the file itself, not one of its links
		}
		sc.h.warnf("driver library %s under driver root %s is built for %s, not for this host's %s (%s); left out",
			path.Join(dir, name), sc.root, elfso.MachineName(info.Machine), elfso.MachineName(sc.arch.Machine), sc.arch.GOARCH)
		return DriverFile{}, false
	}
	soname := info.Soname
	if strings.ContainsRune(soname, '/') {
		sc.h.warnf("driver library %s under driver root %s has an unusable SONAME %q; left out", path.Join(dir, f.names[0]), sc.root, soname)
		return DriverFile{}, false
	}
	lib = DriverFile{Kind: KindLibrary, Path: d.inRoot.join(soname), HostPath: f.host, Soname: soname}
	real := filepath.Base(f.host)
	for _, n := range f.names {
		if n != soname && (n != real || dirOf(f.host) != d.host) {
			lib.Links = append(lib.Links, n)
		}
	}
	sort.Strings(lib.Links)
	return lib, true
}

// readInfo opens f (by its name in d, or at its host path when only links
// lead to it) and reads its SONAME, cache flags and machine. ok is false
// when it cannot be used: a warning says why, except for a file that is
// not ELF at all.
func (sc *driverScan) readInfo(d *xreDir, f *libFile) (elfso.Info, bool) {
	dir := d.path
	var (
		ef  *fdio.File
		err error
	)
	if f.entry != "" {
		ef, err = d.Open(f.entry)
	} else {
		ef, err = fdio.Open(unix.AT_FDCWD, f.host, f.host, 0)
	}
	if err != nil {
		if f.entry == "" && errors.Is(err, fs.ErrNotExist) {
			sc.h.warnf("driver library link %s under driver root %s is dangling (its target %s does not exist); left out", path.Join(dir, f.names[0]), sc.root, sc.inRoot(f.host))
		} else {
			sc.h.warnf("driver library %s under driver root %s cannot be opened (%v); left out", path.Join(dir, f.names[0]), sc.root, err)
		}
		return elfso.Info{}, false
	}
	info, isELF, err := d.ReadOpenInfo(ef, f.host)
	if err != nil {
		if isELF {
			sc.rejected[f.host] = true
			sc.h.warnf("driver library %s under driver root %s is not a usable shared library (%v): a library needs a SONAME; left out", path.Join(dir, f.names[0]), sc.root, err)
		} else {
			sc.log.Debugf("%v; not a library", err)
		}
		return elfso.Info{}, false
	}
	return info, true
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
