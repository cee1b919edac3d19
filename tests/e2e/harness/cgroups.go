package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is where the host's cgroup hierarchies are mounted (cgroup v1:
// one directory per controller; v2: the root itself).
const cgroupRoot = "/sys/fs/cgroup"

// removeCgroupTree removes the cgroup parent (an absolute cgroup path such
// as "/xe2e-crio-1a2b3c4d") and every cgroup below it, in every hierarchy
// under cgroupRoot, deepest first: what kubelet does for the pod cgroups it
// hands to a CRI engine. A process still in the tree is one of the
// test's containers that outlived its engine (a shim killed with its
// daemon leaves its container to init, still holding what it held: a port
// of the host network, sockets): it is killed, or it would break the next
// test. Removal is retried for a few seconds while processes exit.
func removeCgroupTree(parent string) error {
	if parent == "" || parent == "/" || !strings.HasPrefix(parent, "/") {
		return fmt.Errorf("refusing to remove cgroup %q", parent)
	}
	var errs []error
	deadline := time.Now().Add(5 * time.Second)
	for {
		errs = errs[:0]
		roots, err := filepath.Glob(filepath.Join(cgroupRoot, "*") + parent)
		if err != nil {
			return fmt.Errorf("listing cgroups %s: %w", parent, err)
		}
		if _, err := os.Stat(cgroupRoot + parent); err == nil {
			roots = append(roots, cgroupRoot+parent)
		}
		for _, root := range roots {
			var dirs []string
			_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
			killCgroupProcs(dirs)
			for _, dir := range dirs {
				if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
				}
			}
		}
		if len(errs) == 0 || time.Now().After(deadline) {
			return errors.Join(errs...)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killCgroupProcs SIGKILLs every process in the cgroup directories dirs.
func killCgroupProcs(dirs []string) {
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}
