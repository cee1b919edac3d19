package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/hook"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
)

// subcommand is one hook subcommand: which of the library flags it takes
// and what it does in the container root with them.
type subcommand struct {
	name, usage string
	// folders (--folder and --library) and links (--link) say which flags
	// the subcommand takes; at least one value of one of them must be given.
	folders, links bool
	run            func(log *logrus.Logger, root *rootfs.Root, f *libraryFlags) error
}

// subcommands are the hook's subcommands. setup-libraries is the one the
// generator emits: one hook process instead of two per container. The
// other two stay for specs written by older generators.
var subcommands = []subcommand{
	{
		name:    "setup-libraries",
		usage:   "update-ldcache for the --folder folders and --library files, then create-symlinks for the --link links, in one hook process",
		folders: true, links: true,
		run: func(log *logrus.Logger, root *rootfs.Root, f *libraryFlags) error {
			links := f.parsed
			if folders, files := f.folderList(), f.fileList(); len(folders)+len(files) > 0 {
				err := hook.UpdateLDCache(root, folders, hook.Options{LibraryFiles: files, Log: log})
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
			return hook.CreateSymlinks(root, links, hook.Options{Log: log})
		},
	},
	{
		name:    "update-ldcache",
		usage:   "make the libraries in the given container folders (and library files) resolvable by the container's dynamic loader",
		folders: true,
		run: func(log *logrus.Logger, root *rootfs.Root, f *libraryFlags) error {
			return hook.UpdateLDCache(root, f.folderList(), hook.Options{LibraryFiles: f.fileList(), Log: log})
		},
	},
	{
		name:  "create-symlinks",
		usage: "create symlinks in the container (TARGET is the link's text, LINK an absolute path in the container)",
		links: true,
		run: func(log *logrus.Logger, root *rootfs.Root, f *libraryFlags) error {
			return hook.CreateSymlinks(root, f.parsed, hook.Options{Log: log})
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
		flags = append(flags, f.folderFlag(), f.libraryFlag())
		wanted = append(wanted, "--folder", "--library")
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
			if len(f.parsed)+len(f.folderList())+len(f.fileList()) == 0 {
				n := len(wanted)
				choice := wanted[n-1]
				if n > 1 {
					choice = strings.Join(wanted[:n-1], ", ") + " or " + choice
				}
				return fmt.Errorf("%s: give at least one %s", s.name, choice)
			}
			return nil
		},
		Action: func(*cli.Context) error {
			root, err := openContainerRoot(stdin)
			if err != nil {
				return err
			}
			defer root.Close()
			return s.run(log, root, f)
		},
	}
}
