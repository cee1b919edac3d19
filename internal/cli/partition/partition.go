// Package partition is `xpu-cdi partition show` and `xpu-cdi partition
// apply`: the SR-IOV partitions (VFs) of the node's cards, shown and laid
// out (packages internal/partition, the read model, and
// internal/partition/sriov, the writer, do the work).
package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/generate"
	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

const layoutHelp = `A LAYOUT is a comma-separated list of SELECTOR=N. SELECTOR is "all", a card index (the N of
the PF's /dev/xpuN) or a PF's PCI address; N is the number of VFs, 0 the whole card. Later
entries win for the cards they select:
  all=2                     every card in halves
  all=2,0000:3b:00.0=4      halves, but the card at 0000:3b:00.0 in quarters
  all=0                     every card whole again
P800 takes 2 VFs (48 GiB each) or 4 (24 GiB); R200 1, 2 or 3 (16, 8, 5 GiB). Every PF and every
VF takes one of the driver's device handles: 32 per node on P800 (8 cards x 2 VFs fit, 8 x 4 do
not).`

const namedExample = `  [whole]
  all=0
  [halves]
  all=2
  [mixed]         # halves, the card at 0000:3b:00.0 in quarters
  all=2
  0000:3b:00.0=4`

// kubelet are the flags of the PodResources check, shared by both
// subcommands.
type kubelet struct {
	cmdflags.Kubelet
	sharingFile string
	require     bool
}

func (k *kubelet) flags() []cli.Flag {
	return []cli.Flag{
		k.PodResourcesSocketFlag("the kubelet's PodResources `SOCKET`, asked which pods hold the cards (skipped with a note when it does not exist, a host without a kubelet, unless --require-pod-resources; empty: not asked). With --host-root, the default is below it"),
		&cli.BoolFlag{Name: "require-pod-resources", Usage: "a missing --pod-resources-socket is an error, not \"no pods\" (on a node where a kubelet runs: a kubelet restarting or with another root directory)", EnvVars: []string{"XPU_CDI_REQUIRE_POD_RESOURCES"}, Destination: &k.require},
		k.ResourceNameFlag("the device plugin's resource `NAME`; NAME.shared (time-slicing) and NAME-<size> (partitions) count too"),
		k.DRADriverNameFlag("the DRA driver whose claims count"),
		&cli.StringFlag{Name: "sharing-config-file", Usage: "the device plugin's sharing configuration `FILE` (its --config-file): the names it renames resources to (rename: example.com/xpu-ts) count too", EnvVars: []string{"XPU_CDI_SHARING_CONFIG_FILE"}, Destination: &k.sharingFile},
	}
}

// config fills the partition Config of the host flags and the kubelet's.
func (k *kubelet) config(c *cli.Context, host *cmdflags.Host, log *logrus.Logger) (partition.Config, error) {
	cfg := partition.Config{
		DevRoot: host.DevRoot, DriverRoot: host.DriverRoot,
		PodResourcesSocket:  k.PodResourcesSocket,
		RequirePodResources: k.require,
		PodResources:        podresources.Config{ResourcePrefix: k.ResourceName, DRADriver: k.DRADriverName},
		Log:                 log,
	}
	pr, err := cfg.PodResources.WithSharingFile(k.sharingFile)
	if err != nil {
		return cfg, fmt.Errorf("--sharing-config-file (XPU_CDI_SHARING_CONFIG_FILE): %w", err)
	}
	cfg.PodResources = pr
	k.ApplyHostRoot(c, host.HostRoot)
	cfg.PodResourcesSocket = k.PodResourcesSocket
	if host.DriverArch != "" {
		if _, err := elfso.ArchByGOARCH(host.DriverArch); err != nil {
			return cfg, fmt.Errorf("--driver-arch (XPU_CDI_DRIVER_ARCH): %w", err)
		}
		cfg.DiscoverOptions = append(cfg.DiscoverOptions, discover.WithArch(host.DriverArch))
	}
	return cfg, nil
}

// NewCommand returns `xpu-cdi partition`.
func NewCommand(log *logrus.Logger) *cli.Command {
	return &cli.Command{
		Name:  "partition",
		Usage: "Show or lay out the SR-IOV partitions (VFs) of the node's cards",
		Description: `A partition is an SR-IOV virtual function (VF) of a card: its own PCI function and /dev/xpuN,
with its share of the card's memory isolated by the device (docs/partitions.md).

  xpu-cdi partition show
  xpu-cdi partition apply --layout all=2 --output /etc/cdi/baidu.com-xpu.yaml
  xpu-cdi partition assert --layout all=2       exit status 1 when the node is laid out otherwise
  xpu-cdi partition export > partitions.conf    the layout now, as --config reads it

` + layoutHelp,
		Subcommands: []*cli.Command{newShowCommand(log), newApplyCommand(log), newAssertCommand(log), newExportCommand(log)},
	}
}

type showOptions struct {
	host    cmdflags.Host
	kubelet kubelet
	json    bool
}

func newShowCommand(log *logrus.Logger) *cli.Command {
	o := &showOptions{}
	return &cli.Command{
		Name:  "show",
		Usage: "Print the cards, their VFs now and the counts allowed, the partition sizes, the handle budget and who uses each card",
		Description: `For every physical card (a PF): its index, PCI address, model, the VFs enabled now and the
counts a layout may give it, the size of each partition, its VF nodes, and who holds one of its
nodes: processes on the host (through the dev root's /proc/*/fd, which sees every container's
processes) and containers the kubelet gave a device to (PodResources). Then the node's layout
and its device handles, used of the driver's limit. --json prints the same as JSON.`,
		Flags: append(append(o.host.Flags(), o.host.HostRootFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON", Destination: &o.json}), o.kubelet.flags()...),
		Before: func(c *cli.Context) error { return o.host.ApplyHostRoot(c) },
		Action: func(c *cli.Context) error {
			cfg, err := o.kubelet.config(c, &o.host, log)
			if err != nil {
				return err
			}
			s, err := partition.Show(c.Context, cfg)
			if err != nil {
				return hint(err)
			}
			if o.json {
				return printJSON(c.App.Writer, s)
			}
			return printStatus(c.App.Writer, s)
		},
	}
}

// source is where apply and assert take the layout from: --layout, or
// --config with --name for a file of named layouts.
type source struct {
	layout     string
	configFile string
	name       string
	parsed     partition.Layout
	noLayout   bool
}

func (s *source) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "layout", Aliases: []string{"l"}, Usage: "the `LAYOUT` (see above), e.g. all=2,0000:3b:00.0=4", EnvVars: []string{"XPU_CDI_PARTITION_LAYOUT"}, Destination: &s.layout},
		&cli.StringFlag{Name: "config", Usage: "read the layout from `FILE`: one layout ('#' comments; entries may be on several lines), or named layouts, each under a [NAME] line (choose one with --name); a file with no layout changes nothing. The host package applies " + partition.DefaultConfigFile + " at boot", EnvVars: []string{"XPU_CDI_PARTITION_CONFIG"}, Destination: &s.configFile},
		&cli.StringFlag{Name: "name", Usage: "with --config, the layout `NAME` of a file of named layouts", EnvVars: []string{"XPU_CDI_PARTITION_NAME"}, Destination: &s.name},
	}
}

// validate reads the layout. A --config file without any layout sets
// noLayout: there is nothing to do.
func (s *source) validate() error {
	switch {
	case s.layout != "" && s.configFile != "":
		return fmt.Errorf("--layout %s and --config %s both give the layout: give one", s.layout, s.configFile)
	case s.name != "" && s.configFile == "":
		return fmt.Errorf("--name %s names a layout of a --config file: give --config FILE too", s.name)
	case s.layout != "":
		l, err := partition.ParseLayout(s.layout)
		if err != nil {
			return fmt.Errorf("--layout: %w", err)
		}
		s.parsed = l
	case s.configFile != "":
		l, err := partition.ReadConfig(s.configFile, s.name)
		if errors.Is(err, partition.ErrNoLayout) {
			s.noLayout = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		s.parsed = l
	default:
		return errors.New("no layout: give --layout LAYOUT (e.g. all=2) or --config FILE [--name NAME]")
	}
	return nil
}

type applyOptions struct {
	spec       *generate.SpecWriter
	kubelet    kubelet
	src        source
	wait       time.Duration
	settle     time.Duration
	dryRun     bool
	ignoreScan bool
	json       bool
	quiet      bool
}

func newApplyCommand(log *logrus.Logger) *cli.Command {
	o := &applyOptions{spec: generate.NewSpecWriter()}
	flags := append(o.spec.Host().Flags(), o.spec.Flags()...)
	for _, f := range flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "output" {
			sf.Usage = "once the layout changed, rewrite the node's CDI spec `FILE` atomically, as generate --output does (the other spec flags are generate's); default: no spec written"
		}
	}
	flags = append(flags, o.kubelet.flags()...)
	flags = append(flags, o.src.flags()...)
	flags = append(flags,
		&cli.DurationFlag{Name: "wait", Usage: "when a card to change is in use, look again until it is free or `DURATION` has passed; default: refuse at once", EnvVars: []string{"XPU_CDI_PARTITION_WAIT"}, Destination: &o.wait},
		&cli.DurationFlag{Name: "settle", Usage: "wait at most `DURATION` after each sriov_numvfs write for the kernel and udev to show the VFs", Value: sriov.DefaultSettle, EnvVars: []string{"XPU_CDI_PARTITION_SETTLE"}, Destination: &o.settle},
		&cli.BoolFlag{Name: "dry-run", Usage: "check the layout and who uses the cards, print what would change, write nothing", Destination: &o.dryRun},
		// No environment variable: an override of a safety check is typed
		// for one run, never left in a unit file or a pod's environment.
		&cli.BoolFlag{Name: "ignore-incomplete-scan", Usage: "lay the cards out although the scan of the processes holding them did not finish (out of time, or a process whose descriptors may not be read); holders it found still refuse. An admin's override: a process the scan did not reach may hold a card that is then re-laid out under it", Destination: &o.ignoreScan},
		&cli.BoolFlag{Name: "json", Usage: "print the report as JSON", Destination: &o.json},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "log no progress lines (each write, the waits for the kernel and for cards in use); warnings and the report are still printed", EnvVars: []string{"XPU_CDI_PARTITION_QUIET"}, Destination: &o.quiet},
	)
	return &cli.Command{
		Name:  "apply",
		Usage: "Lay the node's cards out: write each card's VF count to its sriov_numvfs",
		Description: layoutHelp + `

First, apply checks that it may write the sriov_numvfs of the cards to change (root's, mode 0644:
run it as root); if not it says so, naming the files, before anything is tried.
The whole layout is checked before anything is written: an unknown card, a count the card's model
does not allow or above its sriov_totalvfs, a card without SR-IOV, a layout over the handle
budget. A card to change that a process or a pod holds is refused (--wait waits for it); so is
every change when the scan of the processes (every thread's descriptors and every mapping) did not
finish within its time bound or could not read a process (--ignore-incomplete-scan overrides that,
for an admin who knows the processes it names). Then each
card to change gets 0 (when it has VFs) and then its count, and after each write apply waits
(--settle) until the kernel shows the virtfn links, the VF functions and their /dev/xpuN nodes.
Right before each card's first write its holders are checked again: a card taken meanwhile is
refused (the cards before it stay as written). A card that fails is put back to its count and the
cards after it are not touched. A card already at its count is not written: apply is idempotent,
and takes no lock. Applies on a node take turns on /run/xpu-cdi/partition.lock below --host-root
(else --dev-root), a file only root can open; apply plans again once it holds it. With --output the node's CDI spec is rewritten
once the layout changed.

Each write, each wait for the kernel (when it starts, every 5s while it lasts, its total) and the
wait for a card in use (once, then what changed) is a line on stderr; --quiet leaves them out. The
report (stdout) gives each card's count before, wanted and after; a dry run shows the counts the
cards would have. After a refusal it shows the node's layout and handles as they are.

Examples:
  xpu-cdi partition apply --layout all=2 --dry-run
  xpu-cdi partition apply --layout all=2,0000:3b:00.0=4 --wait 5m --output /etc/cdi/baidu.com-xpu.yaml
  xpu-cdi partition apply --config ` + partition.DefaultConfigFile + `
  xpu-cdi partition apply --config fleet.conf --name halves

A file of named layouts (choose one with --name; at boot, give the unit
XPU_CDI_PARTITION_NAME=NAME, e.g. with systemctl edit xpu-cdi-partitions.service):
` + namedExample,
		Flags:  flags,
		Before: func(c *cli.Context) error { return o.validate(c) },
		Action: func(c *cli.Context) error { return o.run(c, log) },
	}
}

func (o *applyOptions) validate(c *cli.Context) error {
	if err := o.spec.Validate(c); err != nil {
		return err
	}
	if err := o.src.validate(); err != nil || o.src.noLayout {
		return err
	}
	if o.wait < 0 || o.settle <= 0 {
		return fmt.Errorf("--wait %s and --settle %s must be positive durations", o.wait, o.settle)
	}
	return nil
}

func (o *applyOptions) run(c *cli.Context, log *logrus.Logger) error {
	if o.src.noLayout {
		log.Infof("%s holds no layout: nothing to do", o.src.configFile)
		return nil
	}
	read, err := o.kubelet.config(c, o.spec.Host(), log)
	if err != nil {
		return err
	}
	cfg := sriov.Config{Config: read, HostRoot: o.spec.Host().HostRoot}
	cfg.Wait, cfg.Settle, cfg.DryRun, cfg.IgnoreIncompleteScan = o.wait, o.settle, o.dryRun, o.ignoreScan
	if !o.quiet {
		cfg.Progress = func(line string) { log.Info(line) }
	}
	if o.spec.Output() != "" {
		cfg.AfterApply = func(h *discover.Host) error { return o.spec.Write(h, log) }
	}
	rep, err := sriov.Apply(c.Context, cfg, o.src.parsed)
	if rep != nil {
		if o.json {
			if perr := printJSON(c.App.Writer, rep); perr != nil {
				return errors.Join(err, perr)
			}
		} else if perr := printReport(c.App.Writer, rep); perr != nil {
			return errors.Join(err, perr)
		}
	}
	if errors.Is(err, sriov.ErrInUse) && o.wait == 0 {
		// The writer, which the DRA driver shares, names no flag.
		return fmt.Errorf("%w (--wait DURATION waits for the cards to be free)", err)
	}
	return hint(err)
}

// hint gives a host without any XPU generate's advice.
func hint(err error) error {
	if errors.Is(err, discover.ErrNoDevices) {
		return &cmdflags.HintError{Err: err, Hint: "is the kunlun kernel module loaded (lsmod | grep kunlun)? When the host's /dev is mounted elsewhere, pass --dev-root or --host-root"}
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printStatus prints a Status as a table.
func printStatus(w io.Writer, s *partition.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CARD\tADDRESS\tMODEL\tVFS\tALLOWED\tPARTITION\tVF NODES\tIN USE BY")
	for _, c := range s.Cards {
		idx := "-"
		if c.Index >= 0 {
			idx = strconv.Itoa(c.Index)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", idx, c.Address, c.Model, c.NumVFs, ints(c.Allowed), c.Partitioning(), vfNodes(c), users(c))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "layout: %s\n", s.Layout)
	fmt.Fprintf(w, "handles: %s\n", partition.HandlesText(s.HandlesUsed, s.HandleLimit))
	for _, n := range s.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func vfNodes(c partition.Card) string {
	if len(c.VFs) == 0 {
		return "-"
	}
	s := make([]string, len(c.VFs))
	for i, v := range c.VFs {
		s[i] = strings.TrimPrefix(v.Node, "/dev/")
	}
	return strings.Join(s, ",")
}

func users(c partition.Card) string {
	if len(c.InUse) == 0 {
		return "-"
	}
	s := make([]string, len(c.InUse))
	for i, u := range c.InUse {
		s[i] = u.String()
	}
	return strings.Join(s, "; ")
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// printReport prints what apply did (or would do), or after a refusal the
// node as it is.
func printReport(w io.Writer, r *sriov.Report) error {
	if r.Refused {
		return printRefused(w, r)
	}
	verb := "changed"
	if r.DryRun {
		verb = "would change"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CARD\tADDRESS\tVFS BEFORE\tWANTED\tAFTER\tWRITES\tRESULT")
	for _, c := range r.Cards {
		idx := "-"
		if c.Index >= 0 {
			idx = strconv.Itoa(c.Index)
		}
		result := "unchanged"
		switch {
		case c.Held:
			result = "held, not written"
		case c.Error != "" && c.RolledBack:
			result = "failed, put back"
		case c.Error != "":
			result = "failed"
		case c.Changed() && r.DryRun:
			result = verb
		case c.Changed() && c.After == c.Want:
			result = verb
		case c.Changed():
			result = "not done"
		}
		writes := "-"
		if len(c.Writes) > 0 {
			writes = ints(c.Writes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", idx, c.Address, c.Before, c.Want, c.After, writes, result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "layout: %s -> %s", r.Before, r.After)
	if r.DryRun {
		fmt.Fprint(w, " (dry run: nothing written)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "handles: %d -> %s\n", r.HandlesBefore, partition.HandlesText(r.HandlesUsed, r.HandleLimit))
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// printRefused prints the node as it is after a refusal: the cards the
// layout would change, with their counts now, then the node's layout and
// device handles now (not the refused layout's).
func printRefused(w io.Writer, r *sriov.Report) error {
	if r.Changed() {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CARD\tADDRESS\tVFS NOW\tWANTED")
		for _, c := range r.Cards {
			if !c.Changed() {
				continue
			}
			idx := "-"
			if c.Index >= 0 {
				idx = strconv.Itoa(c.Index)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", idx, c.Address, c.After, c.Want)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "layout now: %s (%s refused, nothing written)\n", r.After, r.Layout)
	fmt.Fprintf(w, "handles now: %s\n", partition.HandlesText(r.HandlesUsed, r.HandleLimit))
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
