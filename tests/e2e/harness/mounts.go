package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	var points []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parsing /proc/self/mountinfo: %w", err)
	}
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points, nil
}

// unescapeMountinfo decodes the \ooo octal escapes of mountinfo fields.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount at or below dir (repeating, because
// stacked mounts show up one at a time).
func unmountUnder(dir string) error {
	dir = filepath.Clean(dir)
	var errs []error
	for range 5 {
		points, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, mp := range points {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killProcessesMentioning SIGKILLs every process whose command line contains
// marker (a unique temporary directory of one test) and waits briefly for
// them to go away. Containerd shims and conmon outlive their daemon; the
// marker guarantees only processes started for this test are touched.
func killProcessesMentioning(marker string) []int {
	if marker == "" || marker == "/" {
		return nil
	}
	var killed []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(marker)) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range killed {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return killed
}
