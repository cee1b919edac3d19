package main

import (
	"errors"
	"io"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/pkg/hook"
	"github.com/xpu-cdi/xpu-cdi/pkg/rootfs"
)

// setupLibrariesCommand does update-ldcache and create-symlinks in one
// process: the hook the generator emits. Every hook is a process that the
// runtime starts and waits for while the container is created; one instead
// of two saves a Go start-up and a read of the state and of the bundle.
func setupLibrariesCommand(log *logrus.Logger, stdin io.Reader) *cli.Command {
	f := &libraryFlags{}
	return &cli.Command{
		Name: "setup-libraries",
		Usage: "update-ldcache for the --folder folders, then create-symlinks for the --link links, " +
			"in one hook process",
		Flags: []cli.Flag{f.folderFlag(), f.linkFlag()},
		Before: func(*cli.Context) error {
			if err := f.parseLinks(); err != nil {
				return err
			}
			if len(f.parsed) == 0 && len(f.folderList()) == 0 {
				return errors.New("setup-libraries: give at least one --folder or --link")
			}
			return nil
		},
		Action: inRoot(stdin, func(root *rootfs.Root) error {
			if folders := f.folderList(); len(folders) > 0 {
				err := hook.UpdateLDCache(root, folders, hook.WithLogger(log))
				switch {
				case err == nil:
				case benign(err) && len(f.parsed) > 0:
					// The links may still be possible (a read-only /etc
					// in a writable root); what cannot be done is said.
					log.Warnf("%v; the container starts without this change", err)
				default:
					return err
				}
			}
			if len(f.parsed) == 0 {
				return nil
			}
			return hook.CreateSymlinks(root, f.parsed, hook.WithLogger(log))
		}),
	}
}
