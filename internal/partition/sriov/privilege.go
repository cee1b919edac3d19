package sriov

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/partition"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// ErrNotPermitted is wrapped by Apply's error when this process may not
// write the sriov_numvfs of a card to change: it is found before anything
// is written or waited for.
var ErrNotPermitted = errors.New("not permitted to write the cards' sriov_numvfs")

// writerCreds are what the kernel checks a write to a sysfs attribute
// against: the effective uid, the groups, and CAP_DAC_OVERRIDE (with it,
// the file's mode does not matter).
type writerCreds struct {
	uid         uint32
	gids        []uint32
	dacOverride bool
}

// processCreds are this process's credentials.
func processCreds() (writerCreds, error) {
	cr := writerCreds{uid: uint32(os.Geteuid()), gids: []uint32{uint32(os.Getegid())}}
	groups, err := os.Getgroups()
	if err != nil {
		return cr, fmt.Errorf("reading this process's groups: %w", err)
	}
	for _, g := range groups {
		cr.gids = append(cr.gids, uint32(g))
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return cr, fmt.Errorf("reading this process's capabilities: %w", err)
	}
	cr.dacOverride = data[0].Effective&(1<<unix.CAP_DAC_OVERRIDE) != 0
	return cr, nil
}

// whyNotWritable says why cr may not write the file of st ("" when it
// may): its file system is read-only, or its mode gives cr no write
// permission and cr lacks CAP_DAC_OVERRIDE.
func whyNotWritable(st *unix.Stat_t, readOnly bool, cr writerCreds) string {
	if readOnly {
		return "its file system is mounted read-only (a container's /sys is: give the container the host's /sys read-write, or run apply on the host)"
	}
	if cr.dacOverride {
		return ""
	}
	bit := uint32(0o002)
	switch {
	case st.Uid == cr.uid:
		bit = 0o200
	case slices.Contains(cr.gids, st.Gid):
		bit = 0o020
	}
	if st.Mode&bit != 0 {
		return ""
	}
	return fmt.Sprintf("it is owned by uid %d, mode %04o, and this process runs as uid %d without CAP_DAC_OVERRIDE: writing a card's VF count takes root (run apply as root, e.g. with sudo)",
		st.Uid, st.Mode&0o7777, cr.uid)
}

// checkWritable checks, before anything is written, that this process may
// write the sriov_numvfs of every card the changes change; the error
// wraps ErrNotPermitted and names every file and what it needs. An
// attribute that cannot be looked at is left to the write, whose checks
// (no link, a regular file) report it.
func (c Config) checkWritable(h *discover.Host, changes []partition.Change) error {
	creds := processCreds
	if c.hooks != nil && c.hooks.creds != nil {
		creds = c.hooks.creds
	}
	cr, err := creds()
	if err != nil {
		return fmt.Errorf("checking who may lay out the cards: %w", err)
	}
	sys, err := openSysfs(h.DevRoot)
	if err != nil {
		return err
	}
	defer sys.close()
	var errs []error
	for _, ch := range changes {
		if ch.From == ch.To {
			continue
		}
		st, ro, err := sys.statAttr(ch.Card.Address, attrNumVFs)
		if err != nil {
			continue
		}
		if why := whyNotWritable(&st, ro, cr); why != "" {
			errs = append(errs, fmt.Errorf("%s: %s: %s", ch.Card.Name(), sys.hostPath(pfDir(ch.Card.Address)+"/"+attrNumVFs), why))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w, nothing changed:\n%w", ErrNotPermitted, errors.Join(errs...))
	}
	return nil
}
