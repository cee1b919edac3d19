package generate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// NewRefreshCommand returns `xpu-cdi refresh`, the command of the
// xpu-cdi-refresh service.
func NewRefreshCommand(log *logrus.Logger) *cli.Command {
	o := &options{}
	cmd := &cli.Command{
		Name:  "refresh",
		Usage: "Regenerate the node spec (/etc/cdi); remove it when the host has no XPU",
		Description: `Run by xpu-cdi-refresh.service at boot and whenever the driver or the devices change.
It writes the spec like "generate --output", but on a host without any XPU it removes a spec it
wrote before (so engines never see devices that are gone) and exits 0 instead of failing the boot.
A host with device nodes but no usable device (no /dev/xpuctrl) is an error: the spec is left as it is.`,
		Flags:  append(o.host.Flags(), o.flags()...),
		Before: func(c *cli.Context) error { return o.validate(c) },
		Action: func(c *cli.Context) error { return o.refresh(c.App.Writer, log) },
	}
	for _, f := range cmd.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "output" {
			sf.Value = cdispec.DefaultSpecPath
			sf.Usage = "write the spec to `FILE`"
		}
	}
	return cmd
}

func (o *options) refresh(stdout io.Writer, log *logrus.Logger) error {
	if o.output == "" {
		o.output = cdispec.DefaultSpecPath
	}
	err := o.run(stdout, log)
	if !errors.Is(err, discover.ErrNoDevices) && !errors.Is(err, discover.ErrNoComputeDevice) {
		return err
	}
	log.Infof("%v", err)
	return removeOwnSpec(o.output, cdispec.Kind(o.spec.Vendor, o.spec.Class), log)
}

// removeOwnSpec removes the spec at path if it is one of ours (same kind).
func removeOwnSpec(path, kind string, log *logrus.Logger) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		log.Infof("no XPU and no spec at %s: nothing to do", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	raw, err := cdispec.Parse(data)
	if err != nil || raw.Kind != kind {
		log.Warnf("%s is not an %s spec written by xpu-cdi; left in place", path, kind)
		return nil
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing stale spec %s: %w", path, err)
	}
	log.Infof("removed %s: the host has no XPU any more", path)
	return nil
}
