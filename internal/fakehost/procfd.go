package fakehost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FakeProcessComm and FakeProcessCmdline are the comm and cmdline of the
// processes FakeOpenFD fakes.
const (
	FakeProcessComm    = "python3"
	FakeProcessCmdline = "python3\x00train.py\x00"
)

// FakeOpenFD fakes, in the tree under root, a process pid holding the
// tree's device node (an in-tree path such as /dev/xpu3) open as file
// descriptor fd: <root>/proc/<pid>/fd/<fd> links to the node's host path
// (<root>/dev/xpu3, absolute, so that stat through the link reaches the
// node as through a real /proc/PID/fd link), with the process's comm
// (FakeProcessComm) and cmdline. Call it again for more descriptors.
func FakeOpenFD(root string, pid, fd int, node string) error {
	if pid <= 0 || fd < 0 {
		return fmt.Errorf("fake host: process %d, descriptor %d: need a pid > 0 and a descriptor >= 0", pid, fd)
	}
	clean := filepath.Clean("/" + node)
	if clean != node || !strings.HasPrefix(clean, "/dev/") {
		return fmt.Errorf("fake host: node %q is not an in-tree path under /dev (such as /dev/xpu0)", node)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("fake host: %w", err)
	}
	target := filepath.Join(abs, filepath.FromSlash(clean))
	if _, err := os.Lstat(target); err != nil {
		return fmt.Errorf("fake host: node %s to hold open: %w", node, err)
	}
	dir := filepath.Join(abs, "proc", strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		return fmt.Errorf("fake host: %w", err)
	}
	for name, text := range map[string]string{"comm": FakeProcessComm + "\n", "cmdline": FakeProcessCmdline} {
		path := filepath.Join(dir, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("fake host: %w", err)
		}
		if err := os.WriteFile(path, []byte(text), 0o444); err != nil {
			return fmt.Errorf("fake host: %w", err)
		}
	}
	link := filepath.Join(dir, "fd", strconv.Itoa(fd))
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("fake host: %w", err)
	}
	if err := os.Symlink(target, link); err != nil {
		return fmt.Errorf("fake host: %w", err)
	}
	return nil
}

// RemoveFakeProcess removes what FakeOpenFD made for pid: the process
// exited. A pid without a fake process is no error.
func RemoveFakeProcess(root string, pid int) error {
	if pid <= 0 {
		return fmt.Errorf("fake host: process %d: need a pid > 0", pid)
	}
	if err := os.RemoveAll(filepath.Join(root, "proc", strconv.Itoa(pid))); err != nil {
		return fmt.Errorf("fake host: %w", err)
	}
	return nil
}
