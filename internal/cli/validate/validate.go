// Package validate implements `xpu-cdi validate`.
package validate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

type options struct {
	specDirs cmdflags.SpecDirs
	kind     cmdflags.Kind
	summary  bool
}

// ErrInvalid is returned when at least one spec failed a check.
var ErrInvalid = errors.New("invalid or stale CDI spec")

// NewCommand returns `xpu-cdi validate`.
func NewCommand(log *logrus.Logger) *cli.Command {
	o := &options{}
	return &cli.Command{
		Name:      "validate",
		Usage:     "Check CDI specs with the CDI library and against the live host",
		ArgsUsage: "[FILE]...",
		Description: `Each FILE (default: every baidu.com/xpu spec in the spec directories) is loaded with the CDI
library, as runtimes load it, and then checked against this host: every host path exists, every
device node is still a character device with the major:minor the spec names. A spec written before
a driver reload (which may change the major) is reported as stale, with the command that fixes it.
A spec of the kind that a spec in a later spec directory (which has priority) shadows is a WARN line
naming the spec the engines use: its devices are never taken from it.
With --summary, each spec that could be read is followed by what it gives a container: per device
how many mounts, hooks and environment variables it brings and its device nodes (the spec's own
edits, which every device brings, are the line "(spec-wide)"). The whole spec is the file itself.
Exit status 1 when any spec fails.`,
		Flags: append(o.kind.Flags("of the specs searched when no FILE is given"),
			o.specDirs.Flag("spec-dir", "spec directory searched when no FILE is given"),
			&cli.BoolFlag{Name: "summary", Usage: "after each spec's verdict, print its devices and their edits (nodes; mount, hook and env counts)", EnvVars: []string{"XPU_CDI_SUMMARY"}, Destination: &o.summary}),
		Before: func(*cli.Context) error { return o.kind.Validate() },
		Action: func(c *cli.Context) error {
			files := c.Args().Slice()
			if len(files) == 0 {
				dirs := o.specDirs.Dirs()
				files = findSpecs(dirs, o.kind.String())
				if len(files) == 0 {
					return fmt.Errorf("no %s spec found in %v; create one with: xpu-cdi generate --output /etc/cdi/%s-%s.yaml", o.kind.String(), dirs, o.kind.Vendor, o.kind.Class)
				}
			}
			failed := 0
			for _, f := range files {
				if !check(c.App.Writer, f, o.summary) {
					failed++
				}
			}
			warnShadows(c.App.Writer, o.specDirs.Dirs(), o.kind.String())
			if failed > 0 {
				return fmt.Errorf("%w: %d of %d spec(s) failed", ErrInvalid, failed, len(files))
			}
			return nil
		},
	}
}

// findSpecs returns the spec files of a kind in dirs: the files the CDI
// library reads, in its order (cdicompat.SpecFiles), read as xpu-cdi reads
// every spec file (cdicompat.ReadSpecFiles: bounded, without blocking). A
// directory that does not exist or cannot be listed, and a file that
// cannot be read or parsed, give no spec.
func findSpecs(dirs []string, kind string) []string {
	var out []string
	for _, d := range cdicompat.SpecDirs(dirs) {
		// One directory at a time: one that cannot be listed ends the
		// library's walk, not this search.
		files, _ := cdicompat.ReadSpecFiles([]string{d})
		for _, f := range files {
			if f.Err != nil {
				continue
			}
			if raw, err := cdispec.Parse(f.Data); err == nil && raw.Kind == kind {
				out = append(out, f.Path())
			}
		}
	}
	return out
}

// warnShadows prints a WARN line for each spec of kind in dirs whose
// devices a spec of higher priority also defines (cdicompat.Shadows, the
// library's priority rule).
func warnShadows(w io.Writer, dirs []string, kind string) {
	// One directory that cannot be listed ends the walk; the files read
	// before it still count.
	files, _ := cdicompat.ReadSpecFiles(cdicompat.SpecDirs(dirs))
	for _, sh := range cdicompat.ResolveSpecs(files).Shadows() {
		if sh.Kind == kind {
			fmt.Fprintf(w, "WARN %s\n", sh)
		}
	}
}

// check validates one file and prints its verdict; it reports success. The
// file is read bounded and without blocking (a FIFO or a link to a device
// is a FAIL at once), and validated as the library loads it
// (cdispec.ValidateFile). With summary, a spec that parsed is followed by
// its summary (writeSummary), whatever the verdict.
func check(w io.Writer, path string, summary bool) bool {
	if err := cdispec.ValidateFile(path); err != nil {
		fmt.Fprintf(w, "FAIL %s: %v\n", path, err)
		return false
	}
	data, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, 0, cdicompat.MaxSpecSize)
	if err != nil {
		fmt.Fprintf(w, "FAIL %s: %v\n", path, err)
		return false
	}
	raw, err := cdispec.Parse(data)
	if err != nil {
		fmt.Fprintf(w, "FAIL %s: %v\n", path, err)
		return false
	}
	ok := verdict(w, path, raw)
	if summary {
		if err := writeSummary(w, path, raw); err != nil {
			fmt.Fprintf(w, "FAIL %s: %v\n", path, err)
			return false
		}
	}
	return ok
}

// verdict prints whether a parsed spec matches this host (LiveProblems)
// and, when it does not, how to fix it; it reports success.
func verdict(w io.Writer, path string, raw *specs.Spec) bool {
	problems := LiveProblems(raw)
	if len(problems) == 0 {
		fmt.Fprintf(w, "OK   %s (kind %s, %d devices, cdiVersion %s)\n", path, raw.Kind, len(raw.Devices), raw.Version)
		return true
	}
	fmt.Fprintf(w, "FAIL %s: the spec does not match this host:\n", path)
	for _, p := range problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprint(w, fixHint(path, raw))
	return false
}

// fixHint says how to fix a spec that does not match the host: the
// command that makes it again with the flags it was made with
// (regenerateFlags) and, for a hook that is missing, how to do without it.
func fixHint(path string, spec *specs.Spec) string {
	flags := regenerateFlags(spec)
	cmd := strings.Join(append([]string{"xpu-cdi", "generate", "--output", path}, flags...), " ")
	hint := fmt.Sprintf("  fix: regenerate it with: %s (or `xpu-cdi refresh` for the spec the packages keep, /etc/cdi/baidu.com-xpu.yaml)\n", cmd)
	for _, h := range hookPaths(spec) {
		if _, err := os.Stat(h); err == nil {
			continue
		}
		noHooks := []string{"xpu-cdi", "generate", "--output", path}
		for i := 0; i < len(flags); i++ {
			if flags[i] == "--hook-path" {
				i++
				continue
			}
			noHooks = append(noHooks, flags[i])
		}
		hint += fmt.Sprintf("  the hook %s is missing: install xpu-runtime-hook there, or give its path with --hook-path, or leave the hooks out: %s --no-hooks\n", h, strings.Join(noHooks, " "))
	}
	return hint
}

// statNode is the cdispec.NodeLookup of a spec's device nodes at their
// host paths, as they are on this host.
func statNode(n *specs.DeviceNode) (string, int64, int64, error) {
	host := n.HostPath
	if host == "" {
		host = n.Path
	}
	var st unix.Stat_t
	if err := unix.Stat(host, &st); err != nil {
		return host, 0, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR && (n.Type == "c" || n.Type == "u" || n.Type == "") {
		return host, 0, 0, cdispec.ErrNotCharDevice
	}
	return host, int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev)), nil
}

// LiveProblems compares a spec with the host: missing host paths, device
// nodes that are gone or whose major:minor changed (cdispec.NodeChecker).
func LiveProblems(spec *specs.Spec) []string {
	var problems []string
	nodes := cdispec.NewNodeChecker(statNode)
	seen := map[string]bool{}
	checkEdits := func(owner string, e *specs.ContainerEdits) {
		problems = append(problems, nodes.Check(owner, e)...)
		for _, m := range e.Mounts {
			if seen[m.HostPath] {
				continue
			}
			seen[m.HostPath] = true
			if _, err := os.Stat(m.HostPath); err != nil {
				problems = append(problems, fmt.Sprintf("%s: mount source %s: %v", owner, m.HostPath, err))
			}
		}
		for _, h := range e.Hooks {
			if st, err := os.Stat(h.Path); err != nil {
				problems = append(problems, fmt.Sprintf("%s: hook %s: %v", owner, h.Path, err))
			} else if st.Mode().Perm()&0o111 == 0 {
				problems = append(problems, fmt.Sprintf("%s: hook %s is not executable", owner, h.Path))
			}
		}
	}
	checkEdits("spec", &spec.ContainerEdits)
	for i := range spec.Devices {
		checkEdits("device "+spec.Devices[i].Name, &spec.Devices[i].ContainerEdits)
	}
	return problems
}
