package partition

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Config says where the host is and how its cards' holders are found:
// the read model's part of a configuration, which the writer (package
// sriov) embeds in its own.
type Config struct {
	// DevRoot is where /dev, /proc and /sys are read (and sriov_numvfs
	// written, by the writer); DriverRoot where the driver's files are.
	// Both default to /.
	DevRoot, DriverRoot string
	// DiscoverOptions are added to every discovery (a fake host's node
	// stater, the driver's architecture).
	DiscoverOptions []discover.Option
	// PodResourcesSocket is the kubelet's PodResources socket; "" skips
	// the check. A socket that does not exist is skipped with a note (a
	// host without a kubelet), or is an error with RequirePodResources.
	PodResourcesSocket string
	// RequirePodResources makes a missing PodResources socket an error:
	// where a kubelet always runs (the chart's installer), a missing
	// socket is a kubelet restarting or at another root directory, not
	// "no pods".
	RequirePodResources bool
	// PodResources is the client configuration (resource prefix, DRA
	// driver, timeout).
	PodResources podresources.Config
	// DRADynamicNames says that the DRA driver (PodResources.DRADriver)
	// offers dynamic partitions, whose device names are cards and slots
	// (xpu-3, xpu-3-q2), not /dev/xpuN: the check of who holds a card
	// reads them so (podresources.Config.DynamicCards).
	DRADynamicNames bool
	Log             logger.Interface
}

// WithDefaults is c with its defaults filled in.
func (c Config) WithDefaults() Config {
	if c.DevRoot == "" {
		c.DevRoot = "/"
	}
	if c.DriverRoot == "" {
		c.DriverRoot = "/"
	}
	c.Log = logger.OrDiscard(c.Log)
	return c
}

// Discover reads the host.
func (c Config) Discover() (*discover.Host, error) {
	opts := append([]discover.Option{
		discover.WithDevRoot(c.DevRoot),
		discover.WithDriverRoot(c.DriverRoot),
		discover.WithLogger(c.Log),
	}, c.DiscoverOptions...)
	return discover.Discover(opts...)
}

// Show reads the node's cards, their layout and who uses them.
func Show(ctx context.Context, c Config) (*Status, error) {
	c = c.WithDefaults()
	h, err := c.Discover()
	if err != nil {
		return nil, err
	}
	return status(ctx, c, h)
}

// status is the Status of the discovered host h, its users included.
func status(ctx context.Context, c Config, h *discover.Host) (*Status, error) {
	cards := Cards(h)
	if len(cards) == 0 {
		return nil, fmt.Errorf("no card with a PCI function found under %s (%d device nodes): nothing to lay out", h.DevRoot, len(h.Devices))
	}
	FillTotalVFs(h.DevRoot, cards)
	notes, _, err := FindUsers(ctx, c, h, cards)
	if err != nil {
		return nil, err
	}
	s := &Status{Cards: cards, Layout: LayoutOf(cards).String(), Notes: notes}
	s.HandlesUsed, s.HandleLimit = Handles(cards)
	return s, nil
}

// FindUsers fills the InUse of cards: the processes holding their nodes
// and the containers the kubelet gave them to. It returns notes on what
// could not be checked, and whether the process scan is incomplete (then
// a card with no user found may still be held).
func FindUsers(ctx context.Context, c Config, h *discover.Host, cards []Card) ([]string, bool, error) {
	for i := range cards {
		cards[i].InUse = nil
	}
	procs, notes, err := scanProcesses(ctx, h.DevRoot, nodeKeys(h, cards))
	if err != nil {
		return nil, false, err
	}
	partial := len(notes) > 0
	for ci, users := range procs {
		cards[ci].InUse = append(cards[ci].InUse, users...)
	}
	pods, note, err := listPods(ctx, c, h)
	if err != nil {
		return nil, false, err
	}
	if note != "" {
		notes = append(notes, note)
	}
	for i := range cards {
		for _, idx := range cardIndices(cards[i]) {
			for _, o := range pods[idx] {
				cards[i].InUse = append(cards[i].InUse, User{
					Node: "/dev/xpu" + fmt.Sprint(idx), Pod: o.Pod, Namespace: o.Namespace,
					Container: o.Container, Claim: o.Claim,
				})
			}
		}
	}
	return notes, partial, nil
}

// cardIndices are the device indices of a card's PF and VFs.
func cardIndices(c Card) []int {
	var out []int
	if c.Index >= 0 {
		out = append(out, c.Index)
	}
	for _, v := range c.VFs {
		out = append(out, v.Index)
	}
	return out
}

// ErrNoPodResources is wrapped by the error of a check of the cards'
// holders that needs the kubelet's PodResources socket
// (Config.RequirePodResources) and finds none.
var ErrNoPodResources = errors.New("no kubelet PodResources socket")

// listPods asks the kubelet who holds which device; a socket that does not
// exist gives a note, not an error (a host without a kubelet), unless
// c.RequirePodResources.
func listPods(ctx context.Context, c Config, h *discover.Host) (podresources.Owners, string, error) {
	if c.PodResourcesSocket == "" {
		return nil, "", nil
	}
	if _, err := os.Stat(c.PodResourcesSocket); errors.Is(err, fs.ErrNotExist) {
		if c.RequirePodResources {
			return nil, "", fmt.Errorf("%w at %s: which pods hold the cards cannot be checked (is the kubelet running, with this root directory?)", ErrNoPodResources, c.PodResourcesSocket)
		}
		return nil, fmt.Sprintf("no kubelet PodResources socket at %s: which pods hold the cards was not checked", c.PodResourcesSocket), nil
	}
	// The DRA driver's dynamic mode names a partition's function by its
	// PCI address in the claim's CDI devices.
	cfg := c.PodResources
	// An address several nodes share (a K200's power domains) maps to
	// none of them: which one a container holds is not known.
	cfg.Addresses = map[string]int{}
	shared := map[string]bool{}
	for _, d := range h.Devices {
		if a := d.Address(); a != "" {
			if _, dup := cfg.Addresses[a]; dup {
				shared[a] = true
			}
			cfg.Addresses[a] = d.Index
		}
	}
	for a := range shared {
		delete(cfg.Addresses, a)
	}
	if c.DRADynamicNames {
		cfg.DynamicCards = dynamicNodes(h)
	}
	owners, err := askKubelet(ctx, c.PodResourcesSocket, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("asking the kubelet which pods hold the cards (--pod-resources-socket %s): %w", c.PodResourcesSocket, err)
	}
	return owners, "", nil
}

// dynamicNodes are the nodes of the cards the DRA driver's dynamic mode
// cuts, by their number in its device names (DynamicCards), the VFs in
// virtfn order: the order of their PCI addresses, as the routing IDs of
// SR-IOV VFs grow with their number.
func dynamicNodes(h *discover.Host) map[int]podresources.CardNodes {
	out := map[int]podresources.CardNodes{}
	for ordinal, c := range DynamicCards(h) {
		vfs := slices.Clone(c.VFs)
		slices.SortFunc(vfs, func(a, b VF) int { return strings.Compare(a.Address, b.Address) })
		n := podresources.CardNodes{PF: c.Index}
		for _, v := range vfs {
			n.VFs = append(n.VFs, v.Index)
		}
		out[ordinal] = n
	}
	return out
}
