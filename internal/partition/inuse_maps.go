package partition

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// mappings takes the cards' nodes the process maps. A mapping holds the
// node after its descriptor is closed (mmap, then close), so it is seen
// in /proc/PID/maps only. The threads share one memory, read from the
// leader; a dead leader (a zombie whose threads live on) has none, and a
// live thread's maps stand for it. It returns false when it did not
// finish.
func (s *scan) mappings(ctx context.Context, pc *procCount, dir int, tids []int) bool {
	lines, ok := s.readMaps(ctx, pc, dir, "maps", dir, "map_files")
	if !ok || lines > 0 {
		return ok
	}
	for _, tid := range tids {
		if tid == pc.pid {
			continue
		}
		// A thread's directory has no map_files: the thread's own
		// /proc/TID has (a fake host has neither).
		lines, ok := s.readMaps(ctx, pc, dir, "task/"+strconv.Itoa(tid)+"/maps", unix.AT_FDCWD, filepath.Join(s.proc, strconv.Itoa(tid), "map_files"))
		if !ok || lines > 0 {
			return ok
		}
	}
	return true
}

// readMaps reads one maps file (path, relative to the process's /proc
// directory dir) line by line and takes the nodes mapped. A line names
// the mapped file's identity (st_dev, inode): a node of the dev root
// matches by it at once. The same device reached through another node
// (a container's own /dev/xpuN, made by its runtime) has another
// identity: its map_files link (mapDir, mapFiles) is followed with statx
// to the file's type and device numbers, once per identity for the whole
// scan. Following map_files takes CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE;
// without them only the identity is matched (docs/partitions.md). It
// returns the lines read, and false when it did not finish.
func (s *scan) readMaps(ctx context.Context, pc *procCount, dir int, path string, mapDir int, mapFiles string) (int, bool) {
	fd, err := unix.Openat(dir, path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if permissionError(err) {
			s.deny(pc.pid)
			return 0, false
		}
		return 0, true // gone
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	r := bufio.NewReaderSize(f, mapsLineMax)
	var last nodeKey
	lines := 0
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 {
			lines++
			if lines%1024 == 0 && ctx.Err() != nil {
				return lines, false
			}
			if m, ok := parseMapsLine(line); ok && m.key != last {
				last = m.key
				s.mapping(pc.pid, m, mapDir, mapFiles)
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return lines, true
		case errors.Is(err, bufio.ErrBufferFull):
			s.brokenf("%s/%d/%s has a line of more than %d bytes: the rest of the process's mappings was not checked", s.proc, pc.pid, path, mapsLineMax)
			return lines, false
		case permissionError(err):
			s.deny(pc.pid)
			return lines, false
		default:
			return lines, true // gone meanwhile
		}
	}
}

// mapsEntry is what a line of /proc/PID/maps says of a file mapping.
type mapsEntry struct {
	name string  // the mapping's name in map_files ("7f10-7f12")
	key  nodeKey // the file's identity (st_dev, inode)
}

// parseMapsLine reads "START-END PERMS OFFSET MAJ:MIN INODE [PATH]", false
// for an anonymous mapping (inode 0) or a line it does not understand.
// The numbers are the kernel's: hex addresses and device numbers, a
// decimal inode.
func parseMapsLine(line []byte) (mapsEntry, bool) {
	var f [5][]byte
	rest := line
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		var ok bool
		f[i], rest, ok = bytes.Cut(rest, []byte(" "))
		if !ok && i < len(f)-1 {
			return mapsEntry{}, false
		}
	}
	ino, err := strconv.ParseUint(string(bytes.TrimRight(f[4], "\n")), 10, 64)
	if err != nil || ino == 0 {
		return mapsEntry{}, false
	}
	startText, endText, ok := bytes.Cut(f[0], []byte("-"))
	majText, minText, ok2 := bytes.Cut(f[3], []byte(":"))
	if !ok || !ok2 {
		return mapsEntry{}, false
	}
	start, err1 := strconv.ParseUint(string(startText), 16, 64)
	end, err2 := strconv.ParseUint(string(endText), 16, 64)
	maj, err3 := strconv.ParseUint(string(majText), 16, 32)
	minor, err4 := strconv.ParseUint(string(minText), 16, 32)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return mapsEntry{}, false
	}
	return mapsEntry{
		name: strconv.FormatUint(start, 16) + "-" + strconv.FormatUint(end, 16),
		key:  nodeKey{dev: unix.Mkdev(uint32(maj), uint32(minor)), ino: ino},
	}, true
}

// mapping takes the node of one file mapping, if it is a card's.
func (s *scan) mapping(pid int, m mapsEntry, mapDir int, mapFiles string) {
	if o, ok := s.keys[m.key]; ok {
		s.hold(pid, o, true)
		return
	}
	s.mu.Lock()
	c, known := s.mapped[m.key]
	s.mu.Unlock()
	if !known {
		if s.noMapFiles.Load() {
			return
		}
		k, ok, err := mapKey(mapDir, mapFiles+"/"+m.name)
		if permissionError(err) {
			s.noMapFiles.Store(true)
		}
		if err != nil {
			return // gone, or may not be followed
		}
		c = classified{key: k, char: ok && k.char}
		s.mu.Lock()
		s.mapped[m.key] = c
		s.mu.Unlock()
	}
	if !c.char {
		return
	}
	if o, ok := s.keys[c.key]; ok {
		s.hold(pid, o, true)
	}
}

// mapKey is fdKey for a map_files link, with the error of the statx.
func mapKey(dir int, name string) (nodeKey, bool, error) {
	var stx unix.Statx_t
	if err := unix.Statx(dir, name, unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_INO, &stx); err != nil {
		return nodeKey{}, false, err
	}
	k, ok := statKey(uint32(stx.Mode), unix.Mkdev(stx.Rdev_major, stx.Rdev_minor), unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino)
	return k, ok, nil
}

// brokenf notes what the scan could not read.
func (s *scan) brokenf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken = append(s.broken, fmt.Sprintf(format, args...))
}
