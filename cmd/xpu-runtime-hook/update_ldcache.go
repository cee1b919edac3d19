package main

import (
	"errors"
	"io"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/pkg/hook"
	"github.com/xpu-cdi/xpu-cdi/pkg/rootfs"
)

func updateLDCacheCommand(log *logrus.Logger, stdin io.Reader) *cli.Command {
	f := &libraryFlags{}
	return &cli.Command{
		Name:  "update-ldcache",
		Usage: "make the libraries in the given container folders resolvable by the container's dynamic loader",
		Flags: []cli.Flag{f.folderFlag()},
		Before: func(*cli.Context) error {
			if len(f.folderList()) == 0 {
				return errors.New("update-ldcache: give at least one --folder")
			}
			return nil
		},
		Action: inRoot(stdin, func(root *rootfs.Root) error {
			return hook.UpdateLDCache(root, f.folderList(), hook.WithLogger(log))
		}),
	}
}
