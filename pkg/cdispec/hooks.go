package cdispec

import (
	"path"
	"sort"

	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// DefaultHookPath is where the packages install xpu-runtime-hook.
const DefaultHookPath = "/usr/bin/xpu-runtime-hook"

// hookProgram is argv[0] of the emitted hooks.
const hookProgram = "xpu-runtime-hook"

// runtimeHook returns the xpu-runtime-hook invocation that finishes the
// injection of the given driver libraries inside a container: one
// setup-libraries hook that makes them resolvable by the container's loader
// (so programs load libxpurt.so.N without LD_LIBRARY_PATH) and creates
// their development links (libxpurt.so -> libxpurt.so.1). The XRE
// directories a library is mounted into are given as --folder, which the
// hook scans; a library found through the loader cache, which lives in a
// system directory of hundreds of the image's own libraries, is given as
// --library, which the hook reads alone. One hook, not one per job: each
// hook is a process the runtime starts and waits for on every container
// creation. It returns nil when there is nothing to do.
func runtimeHook(hookPath string, libraries []discover.DriverFile) *specs.Hook {
	var (
		folders, files, links []string
		seen                  = map[string]bool{}
	)
	for _, l := range libraries {
		dir := path.Dir(l.Path)
		if l.FromLoaderCache {
			files = append(files, l.Path)
		} else {
			for _, p := range append([]string{l.Path}, l.AlsoAt...) {
				if d := path.Dir(p); !seen[d] {
					seen[d] = true
					folders = append(folders, d)
				}
			}
		}
		for _, link := range l.Links {
			links = append(links, path.Base(l.Path)+"::"+path.Join(dir, link))
		}
	}
	if len(folders) == 0 && len(files) == 0 && len(links) == 0 {
		return nil
	}
	sort.Strings(folders)
	sort.Strings(files)
	sort.Strings(links)
	args := []string{hookProgram, "setup-libraries"}
	for _, f := range folders {
		args = append(args, "--folder", f)
	}
	for _, f := range files {
		args = append(args, "--library", f)
	}
	for _, l := range links {
		args = append(args, "--link", l)
	}
	return ociHook("createContainer", hookPath, args)
}
