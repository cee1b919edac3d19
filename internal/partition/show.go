package partition

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Defaults of Config.
const (
	// DefaultSettle bounds the wait for the kernel and udev after one
	// sriov_numvfs write.
	DefaultSettle = 30 * time.Second
	// pollInterval is how often the kernel's state and the users of a
	// card are looked at again while waiting.
	pollInterval = 100 * time.Millisecond
	// waitInterval is how often a card in use is checked again (--wait).
	waitInterval = time.Second
	// progressInterval is how often a wait that lasts reports how long it
	// has waited so far (Config.Progress).
	progressInterval = 5 * time.Second
)

// Config says where the host is and how Show and Apply go about it.
type Config struct {
	// DevRoot is where /dev, /proc and /sys are read (and sriov_numvfs
	// written); DriverRoot where the driver's files are. Both default to /.
	DevRoot, DriverRoot string
	// HostRoot is where the host's / is mounted (the CLI's --host-root,
	// the installer's /host): the layout lock is below it (LockLayout).
	// "": the dev root stands for the host's / and has the lock.
	HostRoot string
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
	// Wait is how long Apply waits for a card in use to become free; 0
	// refuses at once.
	Wait time.Duration
	// Settle bounds the wait for the kernel (and udev) to show the result
	// of one write (default DefaultSettle).
	Settle time.Duration
	// IgnoreIncompleteScan lets Apply change cards although the scan of
	// the processes holding them did not finish (out of time, or a
	// process whose descriptors may not be read): the admin's override
	// of `partition apply --ignore-incomplete-scan`, never set by the
	// installer or a node label. Holders the scan did find still refuse.
	IgnoreIncompleteScan bool
	// DryRun plans and checks, and writes nothing.
	DryRun bool
	Log    logger.Interface
	// Progress, when set, gets one line per step of Apply: each write to
	// a card's sriov_numvfs, the wait for the kernel and udev after it
	// (when it starts, every few seconds while it lasts, and its total),
	// and the wait for a card in use (once, then what changed). Nil: Apply
	// is quiet (the CLI's --quiet).
	Progress func(line string)
	// AfterApply runs once the layout is applied, when something changed,
	// with the host as discovered then (the CLI rewrites the CDI spec).
	AfterApply func(*discover.Host) error

	// hooks are the tests' seams in Apply.
	hooks *applyHooks
	// progressEvery is how often a lasting wait is reported (default
	// progressInterval; shorter in the tests).
	progressEvery time.Duration
}

// applyHooks run at fixed points of Apply, for the tests: beforeLock
// between the first plan and the lock, beforeCard before the last check
// of who holds a card and its first write.
type applyHooks struct {
	beforeLock func()
	beforeCard func(addr string)
	// creds replaces the process's credentials in the check of who may
	// write sriov_numvfs.
	creds func() (writerCreds, error)
}

// lockRoot is the root the layout lock is below: the host root, else
// the dev root.
func (c Config) lockRoot() string {
	if c.HostRoot != "" {
		return c.HostRoot
	}
	return c.DevRoot
}

func (c Config) withDefaults() Config {
	if c.DevRoot == "" {
		c.DevRoot = "/"
	}
	if c.DriverRoot == "" {
		c.DriverRoot = "/"
	}
	if c.Settle <= 0 {
		c.Settle = DefaultSettle
	}
	if c.progressEvery <= 0 {
		c.progressEvery = progressInterval
	}
	c.Log = logger.OrDiscard(c.Log)
	return c
}

// progress reports one step of Apply (Config.Progress).
func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

// discover reads the host.
func (c Config) discover() (*discover.Host, error) {
	opts := append([]discover.Option{
		discover.WithDevRoot(c.DevRoot),
		discover.WithDriverRoot(c.DriverRoot),
		discover.WithLogger(c.Log),
	}, c.DiscoverOptions...)
	return discover.Discover(opts...)
}

// Show reads the node's cards, their layout and who uses them.
func Show(ctx context.Context, c Config) (*Status, error) {
	c = c.withDefaults()
	h, err := c.discover()
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
	c.fillTotalVFs(h.DevRoot, cards)
	notes, _, err := findUsers(ctx, c, h, cards)
	if err != nil {
		return nil, err
	}
	s := &Status{Cards: cards, Layout: layoutOf(cards).String(), Notes: notes}
	s.HandlesUsed, s.HandleLimit = Handles(cards)
	return s, nil
}

// findUsers fills the InUse of cards: the processes holding their nodes
// and the containers the kubelet gave them to. It returns notes on what
// could not be checked, and whether the process scan is incomplete (then
// a card with no user found may still be held).
func findUsers(ctx context.Context, c Config, h *discover.Host, cards []Card) ([]string, bool, error) {
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
	pods, note, err := listPods(ctx, c)
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
func listPods(ctx context.Context, c Config) (podresources.Owners, string, error) {
	if c.PodResourcesSocket == "" {
		return nil, "", nil
	}
	if _, err := os.Stat(c.PodResourcesSocket); errors.Is(err, fs.ErrNotExist) {
		if c.RequirePodResources {
			return nil, "", fmt.Errorf("%w at %s: which pods hold the cards cannot be checked (is the kubelet running, with this root directory?)", ErrNoPodResources, c.PodResourcesSocket)
		}
		return nil, fmt.Sprintf("no kubelet PodResources socket at %s: which pods hold the cards was not checked", c.PodResourcesSocket), nil
	}
	cl := podresources.New(c.PodResourcesSocket, c.PodResources)
	defer func() { _ = cl.Close() }()
	owners, err := cl.List(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("asking the kubelet which pods hold the cards (--pod-resources-socket %s): %w", c.PodResourcesSocket, err)
	}
	return owners, "", nil
}
