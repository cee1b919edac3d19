package main

import (
	"errors"
	"io"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/flagutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/hook"
)

type createSymlinksOptions struct {
	links  cli.StringSlice
	parsed []hook.Link
}

func createSymlinksCommand(log *logrus.Logger, stdin io.Reader) *cli.Command {
	o := createSymlinksOptions{}
	return &cli.Command{
		Name:  "create-symlinks",
		Usage: "create symlinks in the container (TARGET is the link's text, LINK an absolute path in the container)",
		Flags: []cli.Flag{
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
			if len(o.parsed) == 0 {
				return errors.New("create-symlinks: give at least one --link TARGET::LINK")
			}
			return nil
		},
		Action: func(*cli.Context) error {
			root, err := openContainerRoot(stdin)
			if err != nil {
				return err
			}
			defer root.Close()
			return hook.CreateSymlinks(root, o.parsed, hook.WithLogger(log))
		},
	}
}
