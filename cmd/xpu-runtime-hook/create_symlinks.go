package main

import (
	"errors"
	"io"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/pkg/hook"
	"github.com/xpu-cdi/xpu-cdi/pkg/rootfs"
)

func createSymlinksCommand(log *logrus.Logger, stdin io.Reader) *cli.Command {
	f := &libraryFlags{}
	return &cli.Command{
		Name:  "create-symlinks",
		Usage: "create symlinks in the container (TARGET is the link's text, LINK an absolute path in the container)",
		Flags: []cli.Flag{f.linkFlag()},
		Before: func(*cli.Context) error {
			if err := f.parseLinks(); err != nil {
				return err
			}
			if len(f.parsed) == 0 {
				return errors.New("create-symlinks: give at least one --link TARGET::LINK")
			}
			return nil
		},
		Action: inRoot(stdin, func(root *rootfs.Root) error {
			return hook.CreateSymlinks(root, f.parsed, hook.WithLogger(log))
		}),
	}
}
