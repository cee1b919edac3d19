package main

import (
	"errors"
	"io"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/flagutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/hook"
)

type setupLibrariesOptions struct {
	folders cli.StringSlice
	links   cli.StringSlice
	parsed  []hook.Link
}

// setupLibrariesCommand does update-ldcache and create-symlinks in one
// process: the hook the generator emits. Every hook is a process that the
// runtime starts and waits for while the container is created; one instead
// of two saves a Go start-up and a read of the state and of the bundle.
func setupLibrariesCommand(log *logrus.Logger, stdin io.Reader) *cli.Command {
	o := setupLibrariesOptions{}
	return &cli.Command{
		Name: "setup-libraries",
		Usage: "update-ldcache for the --folder folders, then create-symlinks for the --link links, " +
			"in one hook process",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{
				Name:        "folder",
				Usage:       "a library folder in the container (repeatable)",
				EnvVars:     []string{envPrefix + "FOLDERS"},
				Destination: &o.folders,
			},
			&cli.StringSliceFlag{
				Name:        "link",
				Usage:       "TARGET::LINK (repeatable)",
				EnvVars:     []string{envPrefix + "LINKS"},
				Destination: &o.links,
			},
		},
		Before: func(*cli.Context) error {
			var errs []error
			for _, s := range flagutil.SplitList(o.links.Value()) {
				l, err := hook.ParseLink(s)
				errs = append(errs, err)
				o.parsed = append(o.parsed, l)
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			if len(o.parsed) == 0 && len(flagutil.SplitList(o.folders.Value())) == 0 {
				return errors.New("setup-libraries: give at least one --folder or --link")
			}
			return nil
		},
		Action: func(*cli.Context) error {
			root, err := openContainerRoot(stdin)
			if err != nil {
				return err
			}
			defer root.Close()
			if folders := flagutil.SplitList(o.folders.Value()); len(folders) > 0 {
				err := hook.UpdateLDCache(root, folders, hook.WithLogger(log))
				switch {
				case err == nil:
				case benign(err) && len(o.parsed) > 0:
					// The links may still be possible (a read-only /etc
					// in a writable root); what cannot be done is said.
					log.Warnf("%v; the container starts without this change", err)
				default:
					return err
				}
			}
			if len(o.parsed) == 0 {
				return nil
			}
			return hook.CreateSymlinks(root, o.parsed, hook.WithLogger(log))
		},
	}
}
