package shim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// errNoRuntime is returned when no configured low-level runtime exists.
var errNoRuntime = errors.New("no low-level OCI runtime found")

// FindRuntime returns the absolute path of the first candidate that exists
// and is not the shim itself (self is the shim's executable, normally
// /proc/self/exe). A candidate is an absolute path or a name looked up on
// path (a PATH-like list). Another name for the shim (a symlink, a hard link
// or a copy found under the same inode) is skipped, so the shim never
// execs itself in a loop.
func FindRuntime(candidates []string, path string, self string) (string, error) {
	selfInfo, selfErr := os.Stat(self)
	var tried []string
	for _, c := range candidates {
		for _, p := range expand(c, path) {
			info, err := os.Stat(p)
			if err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
				continue
			}
			if selfErr == nil && os.SameFile(info, selfInfo) {
				tried = append(tried, p+" (the shim itself)")
				continue
			}
			return p, nil
		}
		tried = append(tried, c)
	}
	return "", fmt.Errorf("%w: tried %s with PATH=%s; install runc or set low-level-runtimes in the shim's config.toml",
		errNoRuntime, strings.Join(tried, ", "), path)
}

// expand lists where candidate c may live: itself when it is a path, every
// PATH entry otherwise (exec.LookPath would stop at the first, which may be
// the shim installed under the runtime's name).
func expand(c, path string) []string {
	if strings.ContainsRune(c, '/') {
		return []string{c}
	}
	var out []string
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // like exec.LookPath since Go 1.19: no relative PATH entries
		}
		out = append(out, filepath.Join(dir, c))
	}
	return out
}
