// Package config is `xpu-cdi config`: the configuration of
// xpu-container-runtime. `xpu-cdi config default` prints the default
// config.toml, every key commented, parsing back to the defaults.
package config

import (
	"fmt"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	shimconfig "github.com/xpu-cdi/xpu-cdi/internal/config"
)

// NewCommand returns `xpu-cdi config` with its `default` subcommand.
func NewCommand(_ *logrus.Logger) *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "Work with the configuration of xpu-container-runtime",
		Subcommands: []*cli.Command{
			{
				Name:  "default",
				Usage: "Print the default " + shimconfig.DefaultPath + ", every key documented",
				Description: `Prints the configuration file of the runtime shim xpu-container-runtime with every key
set to its default value and explained. Save it and edit what you need:

  xpu-cdi config default > ` + shimconfig.DefaultPath,
				Action: func(c *cli.Context) error {
					if c.Args().Present() {
						return fmt.Errorf("config default takes no arguments, got %q", c.Args().First())
					}
					_, err := fmt.Fprint(c.App.Writer, shimconfig.DefaultTOML())
					return err
				},
			},
		},
	}
}
