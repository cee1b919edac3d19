package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// cgroupRoot is where the host's cgroup hierarchies are mounted (cgroup v1:
// one directory per controller; v2: the root itself).
const cgroupRoot = "/sys/fs/cgroup"

// removeCgroupTree removes the cgroup parent (an absolute cgroup path such
// as "/xe2e-crio-1a2b3c4d") and every cgroup below it, in every hierarchy
// under cgroupRoot, deepest first: what kubelet does for the pod cgroups it
// hands to a CRI engine. A cgroup that still holds a process cannot be
// removed; removal is retried for a few seconds while processes exit.
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
