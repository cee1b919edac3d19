// Command xpu-cdi discovers the Kunlun XPUs of a host, writes CDI specs for
// them, checks specs and configures container engines.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/checkcontainer"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/config"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/info"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/install"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/labels"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/list"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/runtime"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/validate"
	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
)

// Set by the linker (-X main.version=... -X main.commit=...).
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
	if err := newApp(log).Run(os.Args); err != nil {
		printError(os.Stderr, err)
		os.Exit(cmdflags.ExitStatus(err))
	}
}

// printError prints err for the user and, on a line of its own, the hint
// it carries, if any.
func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "xpu-cdi: %v\n", err)
	if h := (*cmdflags.HintError)(nil); errors.As(err, &h) {
		fmt.Fprintf(w, "hint: %s\n", h.Hint)
	}
}

func newApp(log *logrus.Logger) *cli.App {
	var level cmdflags.LogLevel
	return &cli.App{
		Name:    "xpu-cdi",
		Usage:   "Container Device Interface (CDI) support for Baidu Kunlun XPUs",
		Version: fmt.Sprintf("%s (commit %s)", version, commit),
		Description: `xpu-cdi finds the Kunlun XPUs of a host without any vendor library and describes them
in a CDI spec, so that CDI-aware engines can give them to containers:

  xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml
  podman run --device baidu.com/xpu=0 IMAGE
  ctr run --device baidu.com/xpu=0 IMAGE ID`,
		Flags:  []cli.Flag{level.Flag()},
		Before: func(*cli.Context) error { return level.Apply(log) },
		Commands: []*cli.Command{
			generate.NewCommand(log),
			generate.NewRefreshCommand(log),
			info.NewCommand(log),
			labels.NewCommand(log),
			install.NewCommand(log),
			install.NewUninstallCommand(log),
			list.NewCommand(log),
			partition.NewCommand(log),
			validate.NewCommand(log),
			runtime.NewCommand(log),
			config.NewCommand(log),
			checkcontainer.NewCommand(log),
		},
		EnableBashCompletion: true,
		HideHelpCommand:      true,
	}
}
