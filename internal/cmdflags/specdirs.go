package cmdflags

import (
	"strings"

	"github.com/urfave/cli/v2"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/flagutil"
)

// SpecDirs is the group of the CDI spec directory flag (repeatable, or a
// comma-separated XPU_CDI_SPEC_DIRS); the default is the CDI library's,
// the directories engines read.
type SpecDirs struct {
	dirs cli.StringSlice
}

// Flag returns the flag, named name (spec-dir, cdi-spec-dir), whose usage
// starts with purpose ("CDI spec directory checked for the node spec").
func (s *SpecDirs) Flag(name, purpose string) cli.Flag {
	return &cli.StringSliceFlag{
		Name:        name,
		Usage:       purpose + " (repeatable); default: " + strings.Join(cdiapi.DefaultSpecDirs, " and "),
		EnvVars:     []string{"XPU_CDI_SPEC_DIRS"},
		Destination: &s.dirs,
	}
}

// Dirs returns the directories given, else the default ones.
func (s *SpecDirs) Dirs() []string {
	if dirs := flagutil.SplitList(s.dirs.Value()); len(dirs) > 0 {
		return dirs
	}
	return append([]string{}, cdiapi.DefaultSpecDirs...)
}
