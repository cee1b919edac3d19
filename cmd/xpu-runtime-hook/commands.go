package main

import (
	"fmt"
	"io"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/hook"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
)

// subcommand is one hook subcommand: which of the library flags it takes
// and what it does in the container root with them.
type subcommand struct {
	name, usage string
	// folders and links say which flags the subcommand takes; at least
	// one value of one of them must be given.
	folders, links bool
	run            func(log *logrus.Logger, root *rootfs.Root, folders []string, links []hook.Link) error
}

// subcommands are the hook's subcommands. setup-libraries is the one the
// generator emits: one hook process instead of two per container. The
// other two stay for specs written by older generators.
var subcommands = []subcommand{
	{
		name:    "setup-libraries",
		usage:   "update-ldcache for the --folder folders, then create-symlinks for the --link links, in one hook process",
		folders: true, links: true,
		run: func(log *logrus.Logger, root *rootfs.Root, folders []string, links []hook.Link) error {
			if len(folders) > 0 {
				err := hook.UpdateLDCache(root, folders, hook.WithLogger(log))
				switch {
				case err == nil:
				case benign(err) && len(links) > 0:
					// The links may still be possible (a read-only /etc
					// in a writable root); what cannot be done is said.
					log.Warnf("%v; the container starts without this change", err)
				default:
					return err
				}
			}
			if len(links) == 0 {
				return nil
			}
			return hook.CreateSymlinks(root, links, hook.WithLogger(log))
		},
	},
	{
		name:    "update-ldcache",
		usage:   "make the libraries in the given container folders resolvable by the container's dynamic loader",
		folders: true,
		run: func(log *logrus.Logger, root *rootfs.Root, folders []string, _ []hook.Link) error {
			return hook.UpdateLDCache(root, folders, hook.WithLogger(log))
		},
	},
	{
		name:  "create-symlinks",
		usage: "create symlinks in the container (TARGET is the link's text, LINK an absolute path in the container)",
		links: true,
		run: func(log *logrus.Logger, root *rootfs.Root, _ []string, links []hook.Link) error {
			return hook.CreateSymlinks(root, links, hook.WithLogger(log))
		},
	},
}

// command builds the *cli.Command of s: its flags, their validation in
// Before, and an action that opens the container root named by the state
// on stdin.
func (s subcommand) command(log *logrus.Logger, stdin io.Reader) *cli.Command {
	f := &libraryFlags{}
	var flags []cli.Flag
	var wanted []string
	if s.folders {
		flags = append(flags, f.folderFlag())
		wanted = append(wanted, "--folder")
	}
	if s.links {
		flags = append(flags, f.linkFlag())
		wanted = append(wanted, "--link TARGET::LINK")
	}
	return &cli.Command{
		Name:  s.name,
		Usage: s.usage,
		Flags: flags,
		Before: func(*cli.Context) error {
			if s.links {
				if err := f.parseLinks(); err != nil {
					return err
				}
			}
			if len(f.parsed) == 0 && len(f.folderList()) == 0 {
				if len(wanted) == 2 {
					return fmt.Errorf("%s: give at least one %s or %s", s.name, wanted[0], wanted[1])
				}
				return fmt.Errorf("%s: give at least one %s", s.name, wanted[0])
			}
			return nil
		},
		Action: func(*cli.Context) error {
			root, err := openContainerRoot(stdin)
			if err != nil {
				return err
			}
			defer root.Close()
			return s.run(log, root, f.folderList(), f.parsed)
		},
	}
}
