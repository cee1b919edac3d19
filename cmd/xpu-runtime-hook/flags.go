package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/flagutil"
	"github.com/xpu-cdi/xpu-cdi/internal/hook"
)

// libraryFlags are the --folder, --library and --link flags of
// update-ldcache, create-symlinks and setup-libraries.
type libraryFlags struct {
	folders cli.StringSlice
	files   cli.StringSlice
	links   cli.StringSlice
	parsed  []hook.Link
}

func (f *libraryFlags) folderFlag() cli.Flag {
	return &cli.StringSliceFlag{
		Name:        "folder",
		Usage:       "a library folder in the container (repeatable)",
		EnvVars:     []string{envPrefix + "FOLDERS"},
		Destination: &f.folders,
	}
}

func (f *libraryFlags) libraryFlag() cli.Flag {
	return &cli.StringSliceFlag{
		Name:        "library",
		Usage:       "a library file in the container, added to the loader cache without scanning its folder (repeatable)",
		EnvVars:     []string{envPrefix + "LIBRARIES"},
		Destination: &f.files,
	}
}

func (f *libraryFlags) linkFlag() cli.Flag {
	return &cli.StringSliceFlag{
		Name:        "link",
		Usage:       "TARGET::LINK (repeatable)",
		EnvVars:     []string{envPrefix + "LINKS"},
		Destination: &f.links,
	}
}

// folderList returns the --folder values (comma lists split).
func (f *libraryFlags) folderList() []string { return flagutil.SplitList(f.folders.Value()) }

// fileList returns the --library values (comma lists split).
func (f *libraryFlags) fileList() []string { return flagutil.SplitList(f.files.Value()) }

// parseLinks parses every --link value, naming each malformed one.
func (f *libraryFlags) parseLinks() error {
	var errs []error
	for _, s := range flagutil.SplitList(f.links.Value()) {
		l, err := hook.ParseLink(s)
		errs = append(errs, err)
		f.parsed = append(f.parsed, l)
	}
	return errors.Join(errs...)
}
