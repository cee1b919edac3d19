package lookup

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinks is SecureJoin's limit of symlinks followed in one resolution.
const maxSymlinks = 255

// errTooManyLinks stops a walk at maxSymlinks; Resolve reports it as
// SecureJoin does.
var errTooManyLinks = errors.New("too many symlinks")

// Resolver resolves in-root paths below one root as Resolve does, and
// remembers where each leading part of the paths it was given led and what
// lstat and readlink said of each component, so that the components many
// paths and symlink targets share (/usr, /usr/local, the /usr/local/xpu
// version link, the library directory) are looked at once, not once per
// path.
//
// The resolution is SecureJoin's, step for step: each component is lstat'ed
// below the root, a symlink's target is walked in its place (an absolute one
// from the root), ".." never climbs above the root, a component that does
// not exist is taken as it is. What the memory adds is the assumption that
// the tree does not change while the Resolver is used: make one per
// discovery, never a long-lived one. (A path returned by Resolve is a host
// path the caller opens later, so a tree changed by someone else between the
// two was never covered anyway.) The one other difference: SecureJoin gives
// up after 255 symlinks over the whole path, a Resolver after 255 within the
// part of the path it has not met before.
//
// A Resolver is not safe for concurrent use.
type Resolver struct {
	root string
	// resolved maps a leading part of a path given to Resolve, ending at a
	// component boundary, to where it leads inside the root ("" for the
	// root itself, else a clean absolute path without symlinks).
	resolved map[string]string
	// lstats and links are the answers of lstat and readlink by in-root
	// path: the targets of symlinks walk components met before.
	lstats map[string]lstatAnswer
	links  map[string]linkAnswer
}

type lstatAnswer struct {
	fi  fs.FileInfo
	err error
}

type linkAnswer struct {
	dest string
	err  error
}

// NewResolver returns a Resolver for paths below root.
func NewResolver(root string) *Resolver {
	return &Resolver{root: root, resolved: map[string]string{}, lstats: map[string]lstatAnswer{}, links: map[string]linkAnswer{}}
}

// Resolve returns the host path of the in-root path unsafePath, with every
// symlink resolved inside the root, as Resolve(root, unsafePath).
func (r *Resolver) Resolve(unsafePath string) (string, error) {
	if hasDotDot(r.root) {
		return Resolve(r.root, unsafePath) // SecureJoin's error
	}
	// The longest leading part already resolved.
	cur, done := "", 0
	for end := len(unsafePath); end > 0; end = strings.LastIndexByte(unsafePath[:end], '/') {
		if c, ok := r.resolved[unsafePath[:end]]; ok {
			cur, done = c, end
			break
		}
	}
	links := 0
	for done < len(unsafePath) {
		// The next component of unsafePath, walked to its end (through
		// the symlinks it leads to) before the one after it.
		end := len(unsafePath)
		if i := strings.IndexByte(unsafePath[done+1:], '/'); i >= 0 {
			end = done + 1 + i
		}
		start := done
		if unsafePath[start] == '/' {
			start++
		}
		var err error
		if cur, err = r.walk(cur, unsafePath[start:end], &links); err != nil {
			if errors.Is(err, errTooManyLinks) {
				return "", &os.PathError{Op: "SecureJoin", Path: r.root + "/" + unsafePath, Err: syscall.ELOOP}
			}
			return "", err
		}
		r.resolved[unsafePath[:end]] = cur
		done = end
	}
	return filepath.Join(r.root, filepath.Join("/", cur)), nil
}

// walk applies the relative path rest to the resolved in-root path cur, as
// SecureJoin's loop does.
func (r *Resolver) walk(cur, rest string, links *int) (string, error) {
	for rest != "" {
		var part string
		if i := strings.IndexByte(rest, '/'); i < 0 {
			part, rest = rest, ""
		} else {
			part, rest = rest[:i], rest[i+1:]
		}
		var next string
		switch part {
		case "", ".":
			continue
		case "..":
			if next = path.Dir(cur); next == "/" {
				next = ""
			}
			if cur == "" {
				next = ""
			}
			cur = next
			continue
		default:
			next = cur + "/" + part
		}
		fi, err := r.lstat(next)
		if err != nil && !isNotExist(err) {
			return "", err
		}
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if *links++; *links > maxSymlinks {
			return "", errTooManyLinks
		}
		dest, err := r.readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(dest) {
			cur = ""
		}
		rest = dest + "/" + rest
	}
	return cur, nil
}

// lstat is os.Lstat of the in-root path p, asked once.
func (r *Resolver) lstat(p string) (fs.FileInfo, error) {
	a, ok := r.lstats[p]
	if !ok {
		a.fi, a.err = os.Lstat(r.root + p)
		r.lstats[p] = a
	}
	return a.fi, a.err
}

// readlink is os.Readlink of the in-root path p, asked once.
func (r *Resolver) readlink(p string) (string, error) {
	a, ok := r.links[p]
	if !ok {
		a.dest, a.err = os.Readlink(r.root + p)
		r.links[p] = a
	}
	return a.dest, a.err
}

// Stat returns what os.Stat says of hostPath. For a path returned by
// Resolve, whose last component is not a symlink, that is the lstat answer
// the resolution already got.
func (r *Resolver) Stat(hostPath string) (fs.FileInfo, error) {
	rel, ok := hostPath, r.root == "/"
	if !ok {
		rel, ok = strings.CutPrefix(hostPath, r.root)
	}
	if ok {
		if a, ok := r.lstats[rel]; ok && a.err == nil && a.fi.Mode()&fs.ModeSymlink == 0 {
			return a.fi, nil
		}
	}
	return os.Stat(hostPath)
}

func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENOENT)
}

// hasDotDot reports whether p has a ".." component (SecureJoin refuses such
// roots).
func hasDotDot(p string) bool {
	return strings.Contains("/"+p+"/", "/../")
}
