// Package list implements `xpu-cdi list`.
package list

import (
	"fmt"
	"sort"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
)

type options struct {
	specDirs cmdflags.SpecDirs
}

// NewCommand returns `xpu-cdi list`.
func NewCommand(log *logrus.Logger) *cli.Command {
	o := &options{}
	return &cli.Command{
		Name:  "list",
		Usage: "List the qualified CDI device names the spec directories offer",
		Description: `Loads the spec directories the way CDI runtimes do (the CDI library's cache) and prints one
qualified device name per line. Specs that fail to load are reported as warnings on stderr:
their devices are what a runtime would call "unresolvable CDI devices". A spec shadowed by one of
the same devices in a later directory (which has priority) is a warning naming the spec that wins.`,
		Flags: []cli.Flag{o.specDirs.Flag("spec-dir", "CDI spec directory, later ones have priority")},
		Action: func(c *cli.Context) error {
			dirs := o.specDirs.Dirs()
			// Read as every spec reader of xpu-cdi reads (cdicompat): a FIFO
			// or a link to a device in a spec directory is a warning, not a
			// hang.
			files, err := cdicompat.ReadSpecFiles(cdicompat.SpecDirs(dirs))
			if err != nil {
				log.Warnf("reading the CDI spec directories: %v", err)
			}
			cache := cdicompat.ResolveSpecs(files)
			errs := cache.Errors
			paths := make([]string, 0, len(errs))
			for p := range errs {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			for _, p := range paths {
				for _, e := range errs[p] {
					log.Warnf("%s: %v", p, e)
				}
			}
			// A spec whose devices a later directory's spec also defines
			// is never used: say which one the engines take.
			for _, sh := range cache.Shadows() {
				log.Warnf("%s", sh)
			}
			devices := cache.ListDevices()
			if len(devices) == 0 {
				log.Warnf("no CDI device found in %v", dirs)
			}
			for _, d := range devices {
				fmt.Fprintln(c.App.Writer, d)
			}
			return nil
		},
	}
}
