package elfso

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// LibDir is a directory of shared libraries, open once for listing and for
// reading the SONAMEs of its files, the one SONAME scanner of both of
// xpu-cdi's library scans: driver discovery on the host (pkg/discover) and
// the hook's ldconfig-like scan of container folders (internal/hook). A file listed
// as regular is opened by name relative to the directory without following
// a symlink (so the kernel walks one component, and a symlink put in its
// place meanwhile is not followed), through a bare descriptor (fdio), and
// read with one SonameReader's buffers. What to do with symlinks, and which
// of several files sharing a SONAME to take, is the caller's policy. A
// LibDir is not safe for concurrent use.
type LibDir struct {
	f    *os.File
	path string
	sr   SonameReader
}

// NewLibDir takes over f, an open directory that errors call path.
func NewLibDir(f *os.File, path string) *LibDir { return &LibDir{f: f, path: path} }

// OpenLibDir opens the directory at path (a host path).
func OpenLibDir(path string) (*LibDir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return NewLibDir(os.NewFile(uintptr(fd), path), path), nil
}

// Close closes the directory.
func (d *LibDir) Close() error { return d.f.Close() }

// Entries lists the directory sorted by name. With max > 0 it reads at
// most max entries (in directory order, before sorting) and reports
// whether there were more.
func (d *LibDir) Entries(max int) (entries []os.DirEntry, truncated bool, err error) {
	n := -1
	if max > 0 {
		n = max + 1
	}
	entries, err = d.f.ReadDir(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, fmt.Errorf("reading directory %s: %w", d.path, err)
	}
	if max > 0 && len(entries) > max {
		entries, truncated = entries[:max], true
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, truncated, nil
}

// Read returns the SONAME and cache flags of the regular file name of the
// directory (a symlink is refused). On error, isELF tells whether the file
// is an ELF file at all: a library without a SONAME is, a linker script or
// a note is not.
func (d *LibDir) Read(name string) (soname string, flags int32, isELF bool, err error) {
	f, err := d.Open(name)
	if err != nil {
		return "", 0, false, err
	}
	return d.ReadOpen(f, d.path+"/"+name)
}

// Open opens the regular file name of the directory without following a
// symlink, for ReadOpen.
func (d *LibDir) Open(name string) (*fdio.File, error) {
	return fdio.Open(int(d.f.Fd()), name, d.path+"/"+name, unix.O_NOFOLLOW)
}

// ReadOpen is Read for a file the caller opened (a library reached through
// a symlink, resolved by the caller's rules); it closes f. path names f in
// errors.
func (d *LibDir) ReadOpen(f interface {
	io.ReaderAt
	io.Closer
}, path string,
) (soname string, flags int32, isELF bool, err error) {
	info, isELF, err := d.ReadOpenInfo(f, path)
	return info.Soname, info.Flags, isELF, err
}

// ReadOpenInfo is ReadOpen that also returns the file's ELF machine.
func (d *LibDir) ReadOpenInfo(f interface {
	io.ReaderAt
	io.Closer
}, path string,
) (info Info, isELF bool, err error) {
	defer func() { _ = f.Close() }() // read-only
	info, err = d.sr.ReadInfo(f)
	if err != nil {
		var magic [4]byte
		n, _ := f.ReadAt(magic[:], 0)
		return Info{}, n == 4 && bytes.Equal(magic[:], []byte(elf.ELFMAG)), fmt.Errorf("%s: %w", path, err)
	}
	return info, true, nil
}
