// Package labels is `xpu-cdi labels`: the node labels of the host's XPUs,
// printed or written as Node Feature Discovery's local feature file.
package labels

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/labels"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// DefaultOutput is the feature file the refresh unit writes.
var DefaultOutput = filepath.Join(labels.DefaultDir, "xpu-cdi")

type options struct {
	host       cmdflags.Host
	output     string
	configFile string
	kubelet    cmdflags.Kubelet
	replicas   int
	skipNoDir  bool
	sharing    *sharing.Config
}

// NewCommand returns `xpu-cdi labels`.
func NewCommand(log *logrus.Logger) *cli.Command {
	o := &options{}
	return &cli.Command{
		Name:  "labels",
		Usage: "Print the node labels of the host's XPUs, or write them as an NFD feature file",
		Description: `Prints one label per line (baidu.com/xpu.present, .count, .model, .family, .driver-version,
.xre-version, .memory where the host tells them; where a card has SR-IOV, .partition-layout, the
current partition layout in its label form such as all-2 or 0-4_1-0, and one count per partition
size present, such as baidu.com/xpu-24gb.count=4), or, with --output, writes them as a feature
file of Node Feature Discovery's local source, which labels the node from it:
  xpu-cdi labels --output ` + DefaultOutput + `

The file is replaced atomically (a dot-file in the same directory, then a rename) and only when
the labels change. On a host without a usable XPU nothing is printed and the file is removed, so
NFD takes the labels off the node. .sharing-strategy and .replicas are written only when the
sharing is given (--replicas or --config-file, as the device plugin has them): xpu-device-plugin
--labels-file writes them from its own configuration.`,
		Flags: append(append(o.host.Flags(), o.host.HostRootFlag()), o.flags()...),
		Before: func(c *cli.Context) error {
			if err := o.host.ApplyHostRoot(c); err != nil {
				return err
			}
			return o.validate(c)
		},
		Action: func(c *cli.Context) error { return o.run(c.App.Writer, log) },
	}
}

func (o *options) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the NFD feature `FILE` (its directory must exist); default: stdout", EnvVars: []string{"XPU_CDI_LABELS_OUTPUT"}, Destination: &o.output},
		&cli.BoolFlag{Name: "skip-missing-dir", Usage: "when the directory of --output does not exist (no NFD on this host), do nothing and exit 0", EnvVars: []string{"XPU_CDI_LABELS_SKIP_MISSING_DIR"}, Destination: &o.skipNoDir},
		&cli.IntFlag{Name: "replicas", Usage: "label the sharing of the device plugin: each XPU advertised `N` times", EnvVars: []string{"XPU_CDI_REPLICAS"}, Destination: &o.replicas},
		&cli.StringFlag{Name: "config-file", Usage: "label the sharing of the device plugin's configuration `FILE` (sharing.timeSlicing)", EnvVars: []string{"XPU_CDI_CONFIG_FILE"}, Destination: &o.configFile},
		o.kubelet.ResourceNameFlag("the device plugin's resource, as --config-file names it; the partition-count labels are NAME-<size>.count"),
	}
}

func (o *options) validate(c *cli.Context) error {
	switch {
	case o.configFile != "" && c.IsSet("replicas"):
		return fmt.Errorf("--replicas and --config-file %s both give the sharing: give one", o.configFile)
	case o.configFile != "":
		s, err := sharing.Load(o.configFile, o.kubelet.ResourceName)
		if err != nil {
			return fmt.Errorf("--config-file: %w", err)
		}
		o.sharing = &s
	case c.IsSet("replicas"):
		s, err := sharing.FromFlags(o.kubelet.ResourceName, sharing.Flags{Replicas: o.replicas})
		if err != nil {
			return err
		}
		o.sharing = &s
	}
	return nil
}

func (o *options) run(stdout io.Writer, log *logrus.Logger) error {
	var ls []labels.Label
	h, err := o.host.Discover(log)
	switch {
	case errors.Is(err, discover.ErrNoDevices):
		log.Infof("no labels: %v", err)
	case err != nil:
		return err
	default:
		ls = labels.For(h, o.kubelet.ResourceName, o.sharing)
		if ls == nil {
			log.Infof("no labels: no XPU under %s can be given to containers", h.DevRoot)
		}
	}
	if o.output == "" {
		for _, l := range ls {
			if _, err := fmt.Fprintln(stdout, l); err != nil {
				return err
			}
		}
		return nil
	}
	if o.skipNoDir {
		if _, err := os.Stat(filepath.Dir(o.output)); errors.Is(err, fs.ErrNotExist) {
			log.Infof("no %s: Node Feature Discovery is not set up on this host; no labels written", filepath.Dir(o.output))
			return nil
		}
	}
	res, err := labels.WriteFile(o.output, ls, "xpu-cdi labels")
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	labels.LogResult(log, o.output, res, len(ls))
	return nil
}
