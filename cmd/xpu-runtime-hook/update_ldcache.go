package main

import (
	"errors"
	"io"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/flagutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/hook"
)

type updateLDCacheOptions struct {
	folders cli.StringSlice
}

func updateLDCacheCommand(log *logrus.Logger, stdin io.Reader) *cli.Command {
	o := updateLDCacheOptions{}
	return &cli.Command{
		Name:  "update-ldcache",
		Usage: "make the libraries in the given container folders resolvable by the container's dynamic loader",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{
				Name:        "folder",
				Usage:       "a library folder in the container (repeatable)",
				EnvVars:     []string{envPrefix + "FOLDERS"},
				Destination: &o.folders,
			},
		},
		Before: func(*cli.Context) error {
			if len(flagutil.SplitList(o.folders.Value())) == 0 {
				return errors.New("update-ldcache: give at least one --folder")
			}
			return nil
		},
		Action: func(*cli.Context) error {
			root, err := openContainerRoot(stdin)
			if err != nil {
				return err
			}
			defer root.Close()
			return hook.UpdateLDCache(root, flagutil.SplitList(o.folders.Value()), hook.WithLogger(log))
		},
	}
}
