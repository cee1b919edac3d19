package partition

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
)

// Exit statuses of assert: the node does not match, or it could not be
// checked (a bad layout, a host that cannot be read).
const (
	statusMismatch = 1
	statusError    = 2
)

type assertOptions struct {
	host cmdflags.Host
	src  source
}

func newAssertCommand(log *logrus.Logger) *cli.Command {
	o := &assertOptions{}
	return &cli.Command{
		Name:  "assert",
		Usage: "Check that the node's cards are laid out as a layout says; exit status 1 names the cards that differ",
		Description: `Plans the layout as apply does (an invalid layout is refused the same way) and compares it
with the VF counts the cards have now. Nothing is written and nobody is asked who uses the cards.
Exit status: 0 when every card matches, 1 when a card differs (each is named, with its count
now and the layout's), 2 when the check could not be made (a bad layout or file, no cards).
A --config file that holds no layout asks nothing of the cards: it always matches.

Examples:
  xpu-cdi partition assert --layout all=2
  xpu-cdi partition assert --config fleet.conf --name halves && echo laid out`,
		Flags: append(append(o.host.Flags(), o.host.HostRootFlag()), o.src.flags()...),
		Before: func(c *cli.Context) error {
			if err := o.host.ApplyHostRoot(c); err != nil {
				return &cmdflags.StatusError{Err: err, Status: statusError}
			}
			if err := o.src.validate(); err != nil {
				return &cmdflags.StatusError{Err: err, Status: statusError}
			}
			return nil
		},
		Action: func(c *cli.Context) error {
			if o.src.noLayout {
				fmt.Fprintf(c.App.Writer, "%s holds no layout: nothing to check\n", o.src.configFile)
				return nil
			}
			var k kubelet
			cfg, err := k.config(c, &o.host, log)
			if err != nil {
				return &cmdflags.StatusError{Err: err, Status: statusError}
			}
			differ, err := partition.Assert(c.Context, cfg, o.src.parsed)
			if err != nil {
				return &cmdflags.StatusError{Err: hint(err), Status: statusError}
			}
			if len(differ) == 0 {
				fmt.Fprintf(c.App.Writer, "the node matches the layout %s\n", o.src.parsed)
				return nil
			}
			msgs := make([]string, len(differ))
			for i, ch := range differ {
				msgs[i] = fmt.Sprintf("%s has %d VFs, the layout wants %d", ch.Card.Name(), ch.From, ch.To)
			}
			return &cmdflags.StatusError{
				Err:    errors.New("the node does not match the layout " + o.src.parsed.String() + ": " + strings.Join(msgs, "; ")),
				Status: statusMismatch,
			}
		},
	}
}

type exportOptions struct {
	host cmdflags.Host
	name string
}

func newExportCommand(log *logrus.Logger) *cli.Command {
	o := &exportOptions{}
	return &cli.Command{
		Name:  "export",
		Usage: "Print the node's layout now in the form apply --config reads",
		Description: `One entry a line: all=N when every card has N VFs, else one per card (its index, or its
PCI address when the PF has no node). --name puts it under a [NAME] line, as a section of a
file of named layouts.

Examples:
  xpu-cdi partition export > /etc/xpu-cdi/partitions.conf
  xpu-cdi partition export --name node-17 >> fleet.conf`,
		Flags: append(append(o.host.Flags(), o.host.HostRootFlag()),
			&cli.StringFlag{Name: "name", Usage: "print the layout under a [`NAME`] line", Destination: &o.name}),
		Before: func(c *cli.Context) error { return o.host.ApplyHostRoot(c) },
		Action: func(c *cli.Context) error {
			var k kubelet
			cfg, err := k.config(c, &o.host, log)
			if err != nil {
				return err
			}
			l, err := partition.Export(c.Context, cfg)
			if err != nil {
				return hint(err)
			}
			s, err := partition.FormatConfig(l, o.name)
			if err != nil {
				return fmt.Errorf("--name: %w", err)
			}
			_, err = fmt.Fprint(c.App.Writer, s)
			return err
		},
	}
}
