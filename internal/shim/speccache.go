package shim

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"syscall"

	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// The spec cache.
//
// Without it, cdi mode would parse every spec file of the spec directories
// with the CDI library (YAML, then validation) at every create, most of the
// shim's own work (docs/benchmarks.md). The cache keeps, for
// one kind and one list of spec directories, what that parse resolved: the
// container edits of every device of the kind and of the specs they come
// from. An entry starts with a snapshot of exactly what the library reads:
// the name and content of every .json and .yaml file of the directories, in
// the library's order. A create reads those files again and compares them
// with the snapshot byte for byte, which is much cheaper than parsing them;
// any change of a byte, a name or a directory makes a miss, and a miss
// resolves the bytes just read (cdicompat.ResolveSpecs, the library's
// parse and resolution; the library's own reads would block on a FIFO)
// and replaces the entry. So a hit gives the edits the library would give
// for the same files, and the cache needs no invalidation.
//
// The directory is root's (0700) and an entry is used only when it and the
// directory are owned by the shim's user and not writable by others: an
// entry says what gets mounted into containers.

// specCacheFormat changes whenever the entry layout or the meaning of a
// key changes.
const specCacheFormat = "xpu-container-runtime spec cache 2"

// specCacheEntry is what the CDI library resolved for one kind.
//
// On disk an entry is the snapshot of the spec files it was resolved from,
// the length of a JSON header (8 bytes, big endian), the header (this
// struct), then the encoded edits one after the other, spec-wide edits
// first, as long as the header says. A create decodes the header and only
// the edits it asks for: the edits of all the devices, as JSON, cost more
// to scan than the rest of a create's work.
type specCacheEntry struct {
	// Errors are the library's messages about spec files it could not use
	// (logged again on a hit).
	Errors []string `json:"errors,omitempty"`
	// Devices are the devices of the kind by qualified name: indices into
	// Specs and Edits.
	Devices map[string][2]int `json:"devices"`
	// SpecLens and EditLens are the lengths of the encoded edits.
	SpecLens []int `json:"specLens"`
	EditLens []int `json:"editLens"`

	// Specs are the spec-wide edits of the specs the devices come from.
	Specs []lazyEdits `json:"-"`
	// Edits are the edits of the devices. On disk the names of one XPU
	// (index, PCI address, serial) share theirs.
	Edits []lazyEdits `json:"-"`
}

// lazyEdits are container edits decoded from a cache entry the first time
// they are needed (a create asks for one device of many), or the library's
// own when the entry was just resolved.
type lazyEdits struct {
	raw   json.RawMessage
	edits *specs.ContainerEdits
}

func (l *lazyEdits) get() (*specs.ContainerEdits, error) {
	if l.edits == nil {
		var e specs.ContainerEdits
		if err := json.Unmarshal(l.raw, &e); err != nil {
			return nil, err
		}
		l.edits = &e
	}
	return l.edits, nil
}

// encoded returns the JSON of the edits.
func (l *lazyEdits) encoded() (json.RawMessage, error) {
	if l.raw == nil {
		b, err := json.Marshal(l.edits)
		if err != nil {
			return nil, err
		}
		l.raw = b
	}
	return l.raw, nil
}

// resolve returns what the CDI library resolves for the kind from the spec
// directories: the entry of the spec cache when it holds one for the spec
// files as they are, else what cdicompat.ResolveSpecs (the library's
// resolution) makes of them, which then becomes the entry. The files are
// read once (cdicompat.ReadSpecFiles: bounded, without blocking), and both
// the snapshot and the resolution are of those bytes, so an entry always
// holds the edits of the content its snapshot names. beforeParse, when not
// nil, runs after the read, just before the resolution.
func (c *specCache) resolve(log logger.Interface, beforeParse func()) *specCacheEntry {
	files, readErr := cdicompat.ReadSpecFiles(c.dirs)
	var snap []byte
	if c.dir != "" {
		var err error
		if snap, err = c.snapshot(files, readErr); err != nil {
			log.Debugf("spec cache not used: %v", err)
		} else if e, err := c.load(snap); err != nil {
			log.Warnf("spec cache not used: %v", err)
		} else if e != nil {
			log.Debugf("spec cache hit: %s", c.path())
			return e
		}
	}
	if beforeParse != nil {
		beforeParse()
	}
	e := newSpecCacheEntry(c.kind, cdicompat.ResolveSpecs(files))
	if readErr != nil {
		e.Errors = append(e.Errors, fmt.Sprintf("reading the CDI specs in %s: %v", strings.Join(c.dirs, ", "), readErr))
	}
	if snap == nil {
		return e
	}
	switch err := c.store(snap, e); {
	case err == nil:
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		// A shim run by a user (rootless engines) cannot write root's
		// cache: it works without, at the cost of a parse.
		log.Debugf("spec cache not written: %v", err)
	default:
		log.Warnf("spec cache not written: %v", err)
	}
	return e
}

// specCache is the cache of one kind and list of spec directories.
type specCache struct {
	dir  string // "" when the cache is off
	kind string
	dirs []string
}

func newSpecCache(dir, kind string, specDirs []string) *specCache {
	return &specCache{dir: dir, kind: kind, dirs: cdicompat.SpecDirs(specDirs)}
}

// path is the entry file: one per kind and directory list. Two lists
// whose names collide would share a file and only miss more: the snapshot
// in the entry holds the kind and the directories. FNV, not a
// cryptographic hash: the name only spreads entries, the snapshot decides,
// and the crypto packages' initialisation would run at every shim start.
func (c *specCache) path() string {
	h := fnv.New128a()
	writeField(h, specCacheFormat)
	writeField(h, c.kind)
	for _, d := range c.dirs {
		writeField(h, d)
	}
	return filepath.Join(c.dir, "cdi-"+hex.EncodeToString(h.Sum(nil))[:32]+".json")
}

// snapshot encodes the spec files the CDI library reads
// (cdicompat.SpecFiles), as ReadSpecFiles read them, into one byte string,
// with the format, the library's version and the kind. A file that could
// not be read, or a directory that could not be listed, is an error: no
// entry is used or stored, and the resolution reports it.
func (c *specCache) snapshot(files []cdicompat.SpecFile, readErr error) ([]byte, error) {
	if readErr != nil {
		return nil, fmt.Errorf("reading the spec directories: %w", readErr)
	}
	var b bytes.Buffer
	writeField(&b, specCacheFormat)
	writeField(&b, cdiLibraryVersion())
	writeField(&b, c.kind)
	i := 0
	for priority, dir := range c.dirs {
		writeField(&b, "dir")
		writeField(&b, dir)
		if i == len(files) || files[i].Priority != priority {
			// Absent, or no spec file: the library reads nothing there.
			writeField(&b, "absent")
		}
		for ; i < len(files) && files[i].Priority == priority; i++ {
			f := &files[i]
			if f.Err != nil {
				return nil, fmt.Errorf("reading spec file: %w", f.Err)
			}
			writeField(&b, f.Name)
			writeField(&b, f.Data)
		}
	}
	return b.Bytes(), nil
}

// writeField writes s after its length, so that fields cannot run together.
func writeField[T string | []byte](w io.Writer, s T) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	_, _ = w.Write(n[:])
	_, _ = w.Write([]byte(s))
}

// cdiLibraryVersion is the version of the CDI library this binary was built
// with: another library may resolve the same files differently.
func cdiLibraryVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, m := range info.Deps {
		if m.Path == "tags.cncf.io/container-device-interface" {
			if m.Replace != nil {
				m = m.Replace
			}
			return m.Path + "@" + m.Version + " " + m.Sum
		}
	}
	return "unknown"
}

// errCacheUntrusted is returned for a cache entry or directory that another
// user could have written.
var errCacheUntrusted = errors.New("not owned by the shim's user or writable by others")

// load returns the entry resolved from the spec files of snap; (nil, nil)
// when there is none or it was resolved from other files.
func (c *specCache) load(snap []byte) (*specCacheEntry, error) {
	if err := checkOwned(c.dir, true); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	path := c.path()
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening spec cache entry: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("spec cache entry: %w", err)
	}
	if err := checkInfo(path, st, false); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("reading spec cache entry %s: %w", path, err)
	}
	rest, ok := bytes.CutPrefix(data, snap)
	if !ok {
		return nil, nil
	}
	e, err := decodeEntry(rest, c.kind)
	if err != nil {
		return nil, fmt.Errorf("spec cache entry %s: %w", path, err)
	}
	return e, nil
}

// errMalformedEntry is returned for an entry whose parts do not fit.
var errMalformedEntry = errors.New("malformed entry")

// decodeEntry reads what follows the snapshot.
func decodeEntry(data []byte, kind string) (*specCacheEntry, error) {
	if len(data) < 8 {
		return nil, errMalformedEntry
	}
	n := binary.BigEndian.Uint64(data)
	data = data[8:]
	if n > uint64(len(data)) {
		return nil, errMalformedEntry
	}
	var e specCacheEntry
	if err := json.Unmarshal(data[:n], &e); err != nil {
		return nil, err
	}
	data = data[n:]
	cut := func(lens []int) ([]lazyEdits, error) {
		out := make([]lazyEdits, len(lens))
		for i, l := range lens {
			if l < 0 || l > len(data) {
				return nil, errMalformedEntry
			}
			out[i].raw, data = data[:l:l], data[l:]
		}
		return out, nil
	}
	var err error
	if e.Specs, err = cut(e.SpecLens); err != nil {
		return nil, err
	}
	if e.Edits, err = cut(e.EditLens); err != nil {
		return nil, err
	}
	if len(data) != 0 {
		return nil, errMalformedEntry
	}
	for name, i := range e.Devices {
		if i[0] < 0 || i[0] >= len(e.Specs) || i[1] < 0 || i[1] >= len(e.Edits) || !strings.HasPrefix(name, kind+"=") {
			return nil, fmt.Errorf("device %q: %w", name, errMalformedEntry)
		}
	}
	return &e, nil
}

// encode writes what follows the snapshot. Devices with identical edits
// share one copy.
func (e *specCacheEntry) encode() ([]byte, error) {
	h := specCacheEntry{Errors: e.Errors, Devices: make(map[string][2]int, len(e.Devices))}
	var blobs []json.RawMessage
	for i := range e.Specs {
		b, err := e.Specs[i].encoded()
		if err != nil {
			return nil, fmt.Errorf("encoding spec cache entry: %w", err)
		}
		blobs = append(blobs, b)
		h.SpecLens = append(h.SpecLens, len(b))
	}
	// Each device's edits once, in the order of their first device.
	index := make([]int, len(e.Edits))
	seen := map[string]int{}
	for i := range e.Edits {
		b, err := e.Edits[i].encoded()
		if err != nil {
			return nil, fmt.Errorf("encoding spec cache entry: %w", err)
		}
		j, ok := seen[string(b)]
		if !ok {
			j = len(h.EditLens)
			seen[string(b)] = j
			blobs = append(blobs, b)
			h.EditLens = append(h.EditLens, len(b))
		}
		index[i] = j
	}
	for q, i := range e.Devices {
		h.Devices[q] = [2]int{i[0], index[i[1]]}
	}
	header, err := json.Marshal(&h)
	if err != nil {
		return nil, fmt.Errorf("encoding spec cache entry: %w", err)
	}
	out := binary.BigEndian.AppendUint64(nil, uint64(len(header)))
	out = append(out, header...)
	for _, b := range blobs {
		out = append(out, b...)
	}
	return out, nil
}

// store replaces the entry (atomically: concurrent creates may race to
// write the same entry).
func (c *specCache) store(snap []byte, e *specCacheEntry) error {
	if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating spec cache directory: %w", err)
	}
	if err := checkOwned(c.dir, true); err != nil {
		return err
	}
	data, err := e.encode()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(c.path(), append(slices.Clip(snap), data...), atomicfile.WithPerm(0o600), atomicfile.WithoutSync())
}

func checkOwned(path string, dir bool) error {
	st, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("spec cache: %w", err)
	}
	return checkInfo(path, st, dir)
}

func checkInfo(path string, st fs.FileInfo, dir bool) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case dir && !st.IsDir(), !dir && !st.Mode().IsRegular():
		return fmt.Errorf("spec cache %s: unexpected file type %s", path, st.Mode().Type())
	case !ok || int(sys.Uid) != os.Geteuid() || st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("spec cache %s: %w", path, errCacheUntrusted)
	}
	return nil
}

// newSpecCacheEntry records what the library's resolution (specs) gives
// for kind, keeping the decoded edits (encoded only if the entry is stored).
func newSpecCacheEntry(kind string, specs *cdicompat.Specs) *specCacheEntry {
	e := &specCacheEntry{Devices: map[string][2]int{}}
	for _, errs := range specs.Errors {
		for _, err := range errs {
			e.Errors = append(e.Errors, err.Error())
		}
	}
	sort.Strings(e.Errors)
	specIndex := map[*cdicompat.Spec]int{}
	for _, q := range specs.ListDevices() {
		if !strings.HasPrefix(q, kind+"=") {
			continue
		}
		d := specs.Devices[q]
		s := d.Spec
		si, ok := specIndex[s]
		if !ok {
			si = len(e.Specs)
			specIndex[s] = si
			e.Specs = append(e.Specs, lazyEdits{edits: &s.ContainerEdits})
		}
		e.Devices[q] = [2]int{si, len(e.Edits)}
		e.Edits = append(e.Edits, lazyEdits{edits: &d.ContainerEdits})
	}
	return e
}
