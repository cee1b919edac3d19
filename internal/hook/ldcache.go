package hook

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
)

// ErrNoEtc is returned when the container image has no /etc directory.
var ErrNoEtc = errors.New("the container image has no /etc directory")

const (
	// ConfName is the ld.so.conf.d file that lists our folders, so that an
	// ldconfig run later in the container keeps them.
	ConfName      = "00-xpu-cdi.conf"
	cacheName     = "ld.so.cache"
	maxPathFile   = 1 << 20
	confDirName   = "ld.so.conf.d"
	confHeader    = "# Written by xpu-runtime-hook: folders of the Kunlun XPU libraries injected by CDI.\n"
	muslLoaderPre = "ld-musl-"
	muslLoaderSuf = ".so.1"
)

// libc describes which dynamic loaders an image carries.
type libc struct {
	glibc     bool
	muslArchs []string
}

// detectLibc looks for loaders in /lib and /lib64 of the image.
func detectLibc(root *rootfs.Root) libc {
	var l libc
	for _, dir := range []string{"/lib", "/lib64"} {
		d, err := root.OpenDir(dir)
		if err != nil {
			continue
		}
		names, _ := d.Readdirnames(MaxDirEntries)
		_ = d.Close()
		for _, n := range names {
			switch {
			case strings.HasPrefix(n, muslLoaderPre) && strings.HasSuffix(n, muslLoaderSuf):
				arch := strings.TrimSuffix(strings.TrimPrefix(n, muslLoaderPre), muslLoaderSuf)
				if arch != "" && !strings.ContainsAny(arch, "/\x00") && !slices.Contains(l.muslArchs, arch) {
					l.muslArchs = append(l.muslArchs, arch)
				}
			case strings.HasPrefix(n, "ld-linux") && strings.Contains(n, ".so."),
				strings.HasPrefix(n, "ld64.so."), n == "ld.so.1":
				l.glibc = true
			}
		}
	}
	return l
}

// cleanPaths makes the folder or file paths absolute and clean, drops
// duplicates and names that cannot be written to a configuration file;
// what says which in warnings.
func cleanPaths(what string, paths []string, o options) []string {
	var out []string
	for _, f := range paths {
		if f == "" || strings.ContainsAny(f, "\n\x00:") {
			o.log.Warnf("ignoring %s %q: empty or contains a newline, NUL or colon", what, f)
			continue
		}
		c := path.Clean("/" + f)
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// UpdateLDCache makes the libraries in folders, and the library files of
// opts.LibraryFiles (paths inside the container), resolvable by the
// container's dynamic loader.
//
// For glibc images (an ld-linux loader in /lib or /lib64, or an
// /etc/ld.so.cache) it writes /etc/ld.so.conf.d/00-xpu-cdi.conf listing the
// folders and the files' directories, and rewrites /etc/ld.so.cache with the
// entries of the folders and the files first, then the entries the image's
// cache already had. For musl images it appends the same directories to each
// existing /etc/ld-musl-<arch>.path. An image with neither is left alone.
func UpdateLDCache(root *rootfs.Root, folders []string, opts Options) error {
	o := opts.resolve()
	folders = cleanPaths("library folder", folders, o)
	files := cleanPaths("library file", o.files, o)
	if len(folders) == 0 && len(files) == 0 {
		o.log.Debugf("update-ldcache: no folders or library files given, nothing to do")
		return nil
	}
	dirs := slices.Clone(folders)
	for _, f := range files {
		if d := path.Dir(f); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	lc := detectLibc(root)
	etc, err := root.OpenDirForWrite("/etc")
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("%w (%s): %w", ErrNoEtc, root.Path(), err)
		}
		return skipImageShaped(o, "update-ldcache: /etc", err)
	}
	defer etc.Close()

	var errs []error
	for _, arch := range lc.muslArchs {
		errs = append(errs, skipImageShaped(o, "update-ldcache: /etc/ld-musl-"+arch+".path", updateMuslPath(root, etc, arch, dirs, o)))
	}
	if !lc.glibc {
		var st unix.Stat_t
		if err := unix.Fstatat(int(etc.Fd()), cacheName, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			lc.glibc = true
		}
	}
	if lc.glibc {
		errs = append(errs,
			skipImageShaped(o, "update-ldcache: /etc/"+confDirName+"/"+ConfName, writeConf(root, etc, dirs, o)),
			skipImageShaped(o, "update-ldcache: /etc/"+cacheName, writeCache(root, etc, folders, files, o)))
	} else if len(lc.muslArchs) == 0 {
		o.log.Infof("update-ldcache: %s has neither a glibc nor a musl loader in /lib or /lib64; nothing to do", root.Path())
	}
	return errors.Join(errs...)
}

func writeCache(root *rootfs.Root, etc *os.File, folders, files []string, o options) error {
	ours, err := scanLibraries(root, folders, o.log)
	if err != nil {
		return fmt.Errorf("scanning library folders: %w", err)
	}
	for _, e := range scanLibraryFiles(root, files, o.log) {
		if !slices.Contains(ours, e) { // a file may be in a folder too
			ours = append(ours, e)
		}
	}
	sources := append(slices.Clone(folders), files...)
	if len(ours) == 0 {
		o.log.Warnf("update-ldcache: no shared libraries with a SONAME in %v; %s/etc/%s left as it is", sources, root.Path(), cacheName)
		return nil
	}
	unsafePath := "/etc/" + cacheName
	// Our own entries, there from an earlier run in this root, do not
	// count against the bound.
	existing := readImageCache(root, unsafePath, MaxKeptEntries+len(ours), o)

	merged := make([]ldcache.Entry, 0, len(ours)+len(existing))
	merged = append(merged, ours...)
	type key struct{ name, path string }
	mine := make(map[key]bool, len(ours))
	for _, e := range ours {
		mine[key{e.Name, e.Path}] = true
	}
	dropped, keptBytes := 0, 0
	for _, e := range existing {
		switch {
		case mine[key{e.Name, e.Path}]:
		case e.HWCap&ldcache.HWCapExtension != 0:
			dropped++ // the loader falls back to the plain entries
		default:
			merged = append(merged, e)
			keptBytes += len(e.Name) + len(e.Path) + 2
		}
	}
	if kept := len(merged) - len(ours); kept > MaxKeptEntries {
		o.log.Warnf("update-ldcache: the image's %s has %d entries besides ours, more than the %d kept; "+
			"writing the cache without them (the loader still searches the default directories)", unsafePath, kept, MaxKeptEntries)
		merged, existing = merged[:len(ours)], nil
	} else if keptBytes > MaxKeptBytes {
		o.log.Warnf("update-ldcache: the image's %s names %d bytes of libraries, more than the %d kept; "+
			"writing the cache without its entries (the loader still searches the default directories)", unsafePath, keptBytes, MaxKeptBytes)
		merged, existing = merged[:len(ours)], nil
	}
	if dropped > 0 {
		o.log.Debugf("update-ldcache: dropped %d glibc-hwcaps entries of the image's cache", dropped)
	}
	ldcache.Sort(merged)
	if slices.Equal(merged, existing) {
		o.log.Debugf("update-ldcache: %s already up to date", unsafePath)
		return nil
	}
	data, err := ldcache.Encode(merged)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", unsafePath, err)
	}
	if err := rootfs.WriteFileAtomic(etc, cacheName, data, 0o644); err != nil {
		return fmt.Errorf("writing %s in %s: %w", unsafePath, root.Path(), err)
	}
	o.log.Infof("update-ldcache: wrote %s in %s: %d entries of %v, %d kept from the image", unsafePath, root.Path(), len(ours), sources, len(merged)-len(ours))
	return nil
}

// Bounds on what the hook takes from an image's ld.so.cache: the image
// controls it, and every entry kept is parsed, sorted and written again at
// each container creation. Real caches are far below them (a full desktop
// distribution: a few thousand entries, a few hundred KB); a cache beyond
// any of them is replaced by one with the folders' entries alone.
const (
	// MaxCacheSize is the largest image ld.so.cache read.
	MaxCacheSize = 8 << 20
	// MaxKeptEntries is the most entries parsed from it.
	MaxKeptEntries = 32768
	// MaxKeptBytes bounds the names and paths kept from it, and so the
	// size of the cache written.
	MaxKeptBytes = 4 << 20
)

// readImageCache returns the entries of the image's ld.so.cache, or none
// (with a warning) when it is missing, unreadable or beyond the bounds.
func readImageCache(root *rootfs.Root, unsafePath string, maxEntries int, o options) []ldcache.Entry {
	old, err := root.ReadFile(unsafePath, MaxCacheSize)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		o.log.Warnf("update-ldcache: not keeping the entries of the image's %s: %v", unsafePath, err)
		return nil
	}
	existing, err := ldcache.ParseMax(old, maxEntries)
	if err != nil {
		o.log.Warnf("update-ldcache: not keeping the entries of the image's %s: %v", unsafePath, err)
		return nil
	}
	return existing
}

// writeConf writes /etc/ld.so.conf.d/00-xpu-cdi.conf. The directory is
// created in /etc when missing; a symlink in its place is followed inside the
// root only and never onto another mount, and when it leads nowhere the
// file is not written (the caller warns: it only serves a later ldconfig
// run; the cache is what the loader reads now).
func writeConf(root *rootfs.Root, etc *os.File, folders []string, _ options) error {
	content := []byte(confHeader + strings.Join(folders, "\n") + "\n")
	unsafePath := "/etc/" + confDirName
	dir, err := root.OpenDirForWrite(unsafePath)
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(int(etc.Fd()), confDirName, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating %s in %s: %w", unsafePath, root.Path(), err)
		}
		dir, err = root.OpenDirForWrite(unsafePath)
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	if cur, _, err := readAt(dir, ConfName); err == nil && bytes.Equal(cur, content) {
		return nil
	}
	if err := rootfs.WriteFileAtomic(dir, ConfName, content, 0o644); err != nil {
		return fmt.Errorf("writing /etc/%s/%s: %w", confDirName, ConfName, err)
	}
	return nil
}

// readAt reads the small regular file name in dir without following a
// symlink, and returns its content and permissions.
func readAt(dir *os.File, name string) ([]byte, os.FileMode, error) {
	return fdio.ReadFileAt(int(dir.Fd()), name, dir.Name()+"/"+name, unix.O_NOFOLLOW, maxPathFile)
}

// updateMuslPath appends folders to /etc/ld-musl-<arch>.path when that file
// exists; musl reads it on every program start, so nothing else is needed.
func updateMuslPath(root *rootfs.Root, etc *os.File, arch string, folders []string, o options) error {
	name := "ld-musl-" + arch + ".path"
	cur, perm, err := readAt(etc, name)
	if errors.Is(err, unix.ENOENT) {
		o.log.Debugf("update-ldcache: musl image without /etc/%s: nothing to do", name)
		return nil
	}
	if err != nil {
		return err
	}
	have := strings.FieldsFunc(string(cur), func(r rune) bool { return r == '\n' || r == ':' })
	var add []string
	for _, f := range folders {
		if !slices.Contains(have, f) {
			add = append(add, f)
		}
	}
	if len(add) == 0 {
		return nil
	}
	content := cur
	if len(content) > 0 && content[len(content)-1] != '\n' {
		content = append(content, '\n')
	}
	content = append(content, strings.Join(add, "\n")+"\n"...)
	if err := rootfs.WriteFileAtomic(etc, name, content, perm); err != nil {
		return fmt.Errorf("writing /etc/%s in %s: %w", name, root.Path(), err)
	}
	o.log.Infof("update-ldcache: added %v to /etc/%s in %s", add, name, root.Path())
	return nil
}
