// Package info implements `xpu-cdi info`.
package info

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

type options struct {
	host cmdflags.Host
	json bool
}

// NewCommand returns `xpu-cdi info`.
func NewCommand(log *logrus.Logger) *cli.Command {
	o := &options{}
	return &cli.Command{
		Name:  "info",
		Usage: "Show the XPUs and driver files xpu-cdi discovers (for admins and bug reports)",
		Flags: append(o.host.Flags(), o.host.HostRootFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table", EnvVars: []string{"XPU_CDI_INFO_JSON"}, Destination: &o.json},
		),
		Before: func(c *cli.Context) error { return o.host.ApplyHostRoot(c) },
		Action: func(c *cli.Context) error {
			h, err := o.host.Discover(log)
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(c.App.Writer, h)
			}
			return writeText(c.App.Writer, h)
		},
	}
}

type nodeView struct {
	Path     string `json:"path"`
	HostPath string `json:"hostPath"`
	Major    uint32 `json:"major"`
	Minor    uint32 `json:"minor"`
	Mode     string `json:"mode"`
	UID      uint32 `json:"uid"`
	GID      uint32 `json:"gid"`
}

type deviceView struct {
	Index           int      `json:"index"`
	Node            nodeView `json:"node"`
	PCIAddress      string   `json:"pciAddress,omitempty"`
	PCIeRoot        string   `json:"pcieRoot,omitempty"`
	VendorID        string   `json:"vendorID,omitempty"`
	DeviceID        string   `json:"deviceID,omitempty"`
	SubsystemVendor string   `json:"subsystemVendorID,omitempty"`
	SubsystemDevice string   `json:"subsystemDeviceID,omitempty"`
	Model           string   `json:"model"`
	Family          string   `json:"family,omitempty"`
	MemoryMiB       int64    `json:"memoryMiB,omitempty"`
	Function        string   `json:"function"`
	Parent          string   `json:"parent,omitempty"`
	NumVFs          int      `json:"numVFs,omitempty"`
	Serial          string   `json:"serial,omitempty"`
	State           string   `json:"state,omitempty"`
	NUMANode        *int     `json:"numaNode,omitempty"`
	DriverVersion   string   `json:"driverVersion,omitempty"`
	FirmwareVersion string   `json:"firmwareVersion,omitempty"`
	Compute         bool     `json:"compute"`
	Problems        []string `json:"problems,omitempty"`
}

type fileView struct {
	Kind     string   `json:"kind"`
	Path     string   `json:"path"`
	HostPath string   `json:"hostPath"`
	Soname   string   `json:"soname,omitempty"`
	Links    []string `json:"links,omitempty"`
	AlsoAt   []string `json:"alsoAt,omitempty"`
}

type hostView struct {
	DevRoot       string       `json:"devRoot"`
	DriverRoot    string       `json:"driverRoot"`
	DriverVersion string       `json:"driverVersion,omitempty"`
	XRELink       string       `json:"xreLink,omitempty"`
	XRETarget     string       `json:"xreTarget,omitempty"`
	XREVersion    string       `json:"xreVersion,omitempty"`
	Control       *nodeView    `json:"control"`
	Devices       []deviceView `json:"devices"`
	Libraries     []fileView   `json:"libraries"`
	Tools         []fileView   `json:"tools"`
	// Partitions is the SR-IOV layout, on hosts with a card that has
	// SR-IOV.
	Partitions *partitionsView `json:"partitions,omitempty"`
	Warnings   []string        `json:"warnings,omitempty"`
	Notes      []string        `json:"notes,omitempty"`
	Usable     bool            `json:"usable"`
	Unusable   string          `json:"unusableReason,omitempty"`
}

// partitionsView is the layout of the cards (package partition's view).
type partitionsView struct {
	// Layout is the current layout in canonical form (partition apply
	// --layout takes it back).
	Layout string     `json:"layout"`
	Cards  []cardView `json:"cards"`
	// HandlesUsed counts the PFs and VFs; HandleLimit is the driver's
	// budget, 0 when no public source gives one.
	HandlesUsed int `json:"handlesUsed"`
	HandleLimit int `json:"handleLimit,omitempty"`
}

type cardView struct {
	Index   int    `json:"index"`
	Address string `json:"pciAddress"`
	Model   string `json:"model"`
	NumVFs  int    `json:"numVFs"`
	// Allowed are the VF counts a layout may give the card (0: whole).
	Allowed []int `json:"allowed"`
	// VFMemoryMiB is each VF's memory now, Size its name (24gb); absent
	// when the card is whole.
	VFMemoryMiB int64  `json:"vfMemoryMiB,omitempty"`
	Size        string `json:"size,omitempty"`
	// Partitioning is how the card is cut, as `partition show` says it
	// ("2 x 48gb (1/2)", "whole (96gb)").
	Partitioning string `json:"partitioning"`
}

// viewPartitions is nil when no card of h has SR-IOV.
func viewPartitions(h *discover.Host) *partitionsView {
	cards := partition.Cards(h)
	sriov := false
	for _, c := range cards {
		sriov = sriov || c.TotalVFs > 0 || c.NumVFs > 0
	}
	if !sriov {
		return nil
	}
	v := &partitionsView{Layout: partition.Current(h).String()}
	v.HandlesUsed, v.HandleLimit = partition.Handles(cards)
	for _, c := range cards {
		v.Cards = append(v.Cards, cardView{
			Index: c.Index, Address: c.Address, Model: c.Board, NumVFs: c.NumVFs, Allowed: c.Allowed,
			VFMemoryMiB: c.VFMemoryMiB, Size: names.PartitionSizeName(c.VFMemoryMiB), Partitioning: c.Partitioning(),
		})
	}
	return v
}

func viewNode(n *discover.Node) nodeView {
	return nodeView{Path: n.Path, HostPath: n.HostPath, Major: n.Major, Minor: n.Minor, Mode: fmt.Sprintf("%04o", uint32(n.Mode.Perm())), UID: n.UID, GID: n.GID}
}

func viewFiles(fs []discover.DriverFile) []fileView {
	out := []fileView{}
	for _, f := range fs {
		out = append(out, fileView{Kind: string(f.Kind), Path: f.Path, HostPath: f.HostPath, Soname: f.Soname, Links: f.Links, AlsoAt: f.AlsoAt})
	}
	return out
}

func view(h *discover.Host) hostView {
	v := hostView{
		DevRoot: h.DevRoot, DriverRoot: h.DriverRoot, DriverVersion: h.DriverVersion,
		XRELink: h.XRELink, XRETarget: h.XRETarget, XREVersion: h.XREVersion(),
		Libraries: viewFiles(h.Libraries), Tools: viewFiles(h.Tools), Warnings: h.Warnings, Notes: h.Notes, Usable: true,
	}
	if h.Control != nil {
		c := viewNode(h.Control)
		v.Control = &c
	}
	v.Partitions = viewPartitions(h)
	if err := h.CheckUsable(); err != nil {
		v.Usable, v.Unusable = false, err.Error()
	}
	for _, d := range h.Devices {
		f := h.FactsOf(d)
		dv := deviceView{
			Index: d.Index, Node: viewNode(&d.Node), PCIAddress: d.Address(), Model: f.Model, Family: f.Generation, MemoryMiB: f.MemoryMiB,
			Function: string(discover.FunctionUnknown), Serial: f.Serial, State: d.State, DriverVersion: f.DriverVersion,
			FirmwareVersion: f.FirmwareVersion, Compute: d.Compute, Problems: d.Problems,
		}
		if p := d.PCI; p != nil {
			dv.VendorID = fmt.Sprintf("0x%04x", p.VendorID)
			dv.DeviceID = fmt.Sprintf("0x%04x", p.DeviceID)
			dv.SubsystemVendor = fmt.Sprintf("0x%04x", p.SubsystemVendor)
			dv.SubsystemDevice = fmt.Sprintf("0x%04x", p.SubsystemDevice)
			dv.Function, dv.Parent, dv.NumVFs, dv.PCIeRoot = string(p.Function), p.Parent, p.NumVFs, p.PCIeRoot
			if p.NUMANode >= 0 {
				numa := p.NUMANode
				dv.NUMANode = &numa
			}
		}
		v.Devices = append(v.Devices, dv)
	}
	return v
}

func writeJSON(w io.Writer, h *discover.Host) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(view(h))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeText(w io.Writer, h *discover.Host) error {
	v := view(h)
	fmt.Fprintf(w, "Kunlun driver %s (dev root %s, driver root %s)\n", dash(v.DriverVersion), v.DevRoot, v.DriverRoot)
	switch {
	case v.XRETarget != "":
		fmt.Fprintf(w, "XRE: %s -> %s\n", v.XRELink, v.XRETarget)
	case v.XRELink != "":
		fmt.Fprintf(w, "XRE: %s\n", v.XRELink)
	}
	if c := v.Control; c != nil {
		fmt.Fprintf(w, "Control node: %s %d:%d mode %s uid %d gid %d\n", c.Path, c.Major, c.Minor, c.Mode, c.UID, c.GID)
	} else {
		fmt.Fprintln(w, "Control node: MISSING (/dev/xpuctrl)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tNODE\tMAJ:MIN\tPCI ADDRESS\tMODEL\tFUNCTION\tSERIAL\tSTATE\tNUMA\tOFFERED")
	for _, d := range v.Devices {
		numa := "-"
		if d.NUMANode != nil {
			numa = strconv.Itoa(*d.NUMANode)
		}
		fn := d.Function
		switch {
		case d.Parent != "":
			fn += " of " + d.Parent
		case d.NumVFs > 0:
			fn += fmt.Sprintf(" (%d VFs)", d.NumVFs)
		}
		offered := "yes"
		if !d.Compute {
			offered = "no (VFs enabled: management only)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d:%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Index, d.Node.Path, d.Node.Major, d.Node.Minor,
			dash(d.PCIAddress), d.Model, fn, dash(d.Serial), dash(d.State), numa, offered)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p := v.Partitions; p != nil {
		if err := writePartitions(w, p); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Driver files:")
	if len(v.Libraries)+len(v.Tools) == 0 {
		fmt.Fprintln(w, "  none (containers get device nodes only)")
	}
	for _, f := range append(v.Libraries, v.Tools...) {
		fmt.Fprintf(w, "  %-7s %s <- %s", f.Kind, f.Path, f.HostPath)
		if len(f.Links) > 0 {
			fmt.Fprintf(w, " (also %v)", f.Links)
		}
		if len(f.AlsoAt) > 0 {
			fmt.Fprintf(w, " (also mounted at %v)", f.AlsoAt)
		}
		fmt.Fprintln(w)
	}
	if len(v.Notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Notes:")
		for _, n := range v.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	var problems []string
	for _, d := range v.Devices {
		for _, p := range d.Problems {
			problems = append(problems, fmt.Sprintf("%s: %s", d.Node.Path, p))
		}
	}
	problems = append(problems, v.Warnings...)
	if !v.Usable {
		problems = append(problems, "not usable: "+v.Unusable)
	}
	if len(problems) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Problems:")
		for _, p := range problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	return nil
}

// writePartitions is the Partitions section of the text: the layout, one
// line per card, the handle budget.
func writePartitions(w io.Writer, p *partitionsView) error {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Partitions (SR-IOV): layout %s\n", p.Layout)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CARD\tPCI ADDRESS\tMODEL\tVFS\tALLOWED\tPARTITION")
	for _, c := range p.Cards {
		idx := "-"
		if c.Index >= 0 {
			idx = strconv.Itoa(c.Index)
		}
		allowed := make([]string, len(c.Allowed))
		for i, n := range c.Allowed {
			allowed[i] = strconv.Itoa(n)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", idx, c.Address, c.Model, c.NumVFs, dash(strings.Join(allowed, ",")), c.Partitioning)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "  handles: %s\n", partition.HandlesText(p.HandlesUsed, p.HandleLimit))
	return nil
}
