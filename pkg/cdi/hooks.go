package cdi

import (
	"path"
	"sort"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Hook is an OCI hook to run for every container that gets a device of the
// spec. Env is always emitted explicitly (HookEnv when empty), so a hook
// never inherits an environment shaped by the image.
type Hook struct {
	// Stage is the OCI hook name, e.g. "createContainer".
	Stage string
	Path  string
	// Args is the whole argv, Args[0] being the program name.
	Args []string
	Env  []string
}

// DefaultHookPath is where the packages install xpu-runtime-hook.
const DefaultHookPath = "/usr/bin/xpu-runtime-hook"

// hookProgram is argv[0] of the emitted hooks.
const hookProgram = "xpu-runtime-hook"

// RuntimeHooks returns the xpu-runtime-hook invocations that finish the
// injection of the given driver libraries inside a container: one
// update-ldcache for their directories (so programs load libxpurt.so.1
// without LD_LIBRARY_PATH) and one create-symlinks for their development
// links (libxpurt.so -> libxpurt.so.1). It returns nothing when there is
// nothing to do.
func RuntimeHooks(hookPath string, libraries []discover.DriverFile) []Hook {
	if hookPath == "" {
		hookPath = DefaultHookPath
	}
	var (
		hooks   []Hook
		folders []string
		links   []string
		seen    = map[string]bool{}
	)
	for _, l := range libraries {
		dir := path.Dir(l.Path)
		if !seen[dir] {
			seen[dir] = true
			folders = append(folders, dir)
		}
		for _, link := range l.Links {
			links = append(links, path.Base(l.Path)+"::"+path.Join(dir, link))
		}
	}
	sort.Strings(folders)
	sort.Strings(links)
	if len(folders) > 0 {
		args := []string{hookProgram, "update-ldcache"}
		for _, f := range folders {
			args = append(args, "--folder", f)
		}
		hooks = append(hooks, Hook{Stage: "createContainer", Path: hookPath, Args: args})
	}
	if len(links) > 0 {
		args := []string{hookProgram, "create-symlinks"}
		for _, l := range links {
			args = append(args, "--link", l)
		}
		hooks = append(hooks, Hook{Stage: "createContainer", Path: hookPath, Args: args})
	}
	return hooks
}
