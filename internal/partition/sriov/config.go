package sriov

import (
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
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
)

// Config says where the host is and how Apply goes about it: the read
// model's Config (roots, discovery, how the cards' holders are found)
// and what only a writer needs.
type Config struct {
	partition.Config
	// HostRoot is where the host's / is mounted (the CLI's --host-root,
	// the installer's /host): the layout lock is below it (LockLayout).
	// "": the dev root stands for the host's / and has the lock.
	HostRoot string
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
	// AfterApply runs once the layout is applied, when something changed,
	// with the host as discovered then (the CLI rewrites the CDI spec).
	AfterApply func(*discover.Host) error

	// hooks are the tests' seams in Apply.
	hooks *applyHooks
}

// applyHooks run at fixed points of Apply, for the tests: beforeLock
// between the first plan and the lock, beforeCard before the last check
// of who holds a card and its first write.
type applyHooks struct {
	beforeLock func()
	beforeCard func(addr string)
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
	c.Config = c.WithDefaults()
	if c.Settle <= 0 {
		c.Settle = DefaultSettle
	}
	return c
}
