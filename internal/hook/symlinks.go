package hook

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
)

// Link is a symlink to create in the container: Link (an absolute path in
// the container) will contain the text Target.
type Link struct {
	Target string
	Link   string
}

// LinkSeparator separates the target from the link in ParseLink's input.
const LinkSeparator = "::"

// ParseLink parses "TARGET::LINK".
func ParseLink(s string) (Link, error) {
	target, link, ok := strings.Cut(s, LinkSeparator)
	switch {
	case !ok:
		return Link{}, fmt.Errorf("link %q: want TARGET%sLINK", s, LinkSeparator)
	case target == "" || link == "":
		return Link{}, fmt.Errorf("link %q: empty target or link path", s)
	case !path.IsAbs(link):
		return Link{}, fmt.Errorf("link %q: the link path %q must be absolute (a path in the container)", s, link)
	case strings.ContainsRune(s, 0):
		return Link{}, fmt.Errorf("link %q: contains a NUL byte", s)
	}
	if c := path.Clean(link); c == "/" {
		return Link{}, fmt.Errorf("link %q: the link path is the root", s)
	}
	return Link{Target: target, Link: link}, nil
}

// ErrExists is returned (wrapped) for a link path that is taken by a regular
// file, directory or other non-symlink, which CreateSymlinks never replaces.
var ErrExists = errors.New("exists and is not a symlink")

// CreateSymlinks creates each link inside root. The parent directory is
// resolved inside the root and created when missing; a missing link is
// created with symlinkat, which never replaces anything, and a different
// symlink is replaced by one made under a temporary name and renamed over
// it, so the link path always holds a whole link. An identical existing link
// is left alone, and anything else at the link path is refused (ErrExists).
// The target is never followed, and no parent directory is resolved or
// created on another mount than the root's. What the image's layout does
// not allow (ErrExists, a parent that is a file, a dangling symlink or on
// another mount) is a warning and that link is skipped: see
// skipImageShaped.
func CreateSymlinks(root *rootfs.Root, links []Link, opts Options) error {
	o := opts.resolve()
	var errs []error
	for _, l := range links {
		errs = append(errs, skipImageShaped(o, "create-symlinks", createSymlink(root, l, o)))
	}
	return errors.Join(errs...)
}

func createSymlink(root *rootfs.Root, l Link, o options) error {
	unsafePath := path.Clean("/" + l.Link)
	parent, name := path.Split(unsafePath)
	dir, err := root.MkdirAll(parent, 0o755)
	if err != nil {
		return fmt.Errorf("link %s -> %s: %w", unsafePath, l.Target, err)
	}
	defer dir.Close()
	dfd := int(dir.Fd())

	// Two rounds: when another hook of a container sharing this root (the
	// same image directory used by several containers) creates the link
	// between our check and our symlinkat, look again: the same link is fine.
	for round := 0; ; round++ {
		err := placeSymlink(dfd, name, unsafePath, l, root, o)
		if err == nil || !errors.Is(err, unix.EEXIST) || round == 1 {
			return err
		}
	}
}

// placeSymlink makes name (in dfd) a symlink to l.Target. EEXIST (wrapped)
// means the name was taken between the check and the creation.
func placeSymlink(dfd int, name, unsafePath string, l Link, root *rootfs.Root, o options) error {
	var st unix.Stat_t
	switch err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
		// symlinkat creates the link with its target in one step and
		// fails (EEXIST) if anything appeared there meanwhile: no
		// temporary name and rename needed.
		if err := unix.Symlinkat(l.Target, dfd, name); err != nil {
			return fmt.Errorf("link %s -> %s in %s: creating it: %w", unsafePath, l.Target, root.Path(), err)
		}
		o.log.Infof("create-symlinks: %s -> %s in %s", unsafePath, l.Target, root.Path())
		return nil
	case err != nil:
		return fmt.Errorf("link %s in %s: stat: %w", unsafePath, root.Path(), err)
	case st.Mode&unix.S_IFMT != unix.S_IFLNK:
		return fmt.Errorf("link %s in %s: %w (mode %#o); not replacing it", unsafePath, root.Path(), ErrExists, st.Mode&unix.S_IFMT)
	default:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(dfd, name, buf)
		if err == nil && string(buf[:n]) == l.Target {
			o.log.Debugf("create-symlinks: %s -> %s already exists", unsafePath, l.Target)
			return nil
		}
	}

	tmp := rootfs.TempName(name)
	if err := unix.Symlinkat(l.Target, dfd, tmp); err != nil {
		return fmt.Errorf("link %s -> %s in %s: creating %s: %w", unsafePath, l.Target, root.Path(), tmp, err)
	}
	// Replaces the different symlink found above in one step.
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("link %s -> %s in %s: renaming it into place: %w", unsafePath, l.Target, root.Path(), err)
	}
	o.log.Infof("create-symlinks: %s -> %s in %s", unsafePath, l.Target, root.Path())
	return nil
}
