package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// This file prepares the devices of dynamic mode (dynamic.go): a claim for
// a slot (xpu-3-q2) gets the VF at that position of the card once the card
// has the slot's count of VFs, a claim for the whole card (xpu-3) the PF
// once the card has none. A card without the claim's count is laid out
// again (0, then the count) through the SR-IOV writer (sriov.Apply, under
// the node's layout lock, with its checks of who holds the card), but only
// when no claim of this driver holds it; otherwise the claim is refused
// with ErrCardBusy. The answer names the function by its PCI address, as
// the node spec's PCI-address names do.
//
// Each re-layout is recorded in a layout record (layoutjournal.go) before
// the first write (PrepareStarted) and after the last (PrepareCompleted).
// A record left started (the driver died in between) is finished before
// any other claim is prepared: the card is kept at its new count when the
// kernel shows it complete, else put back to its old count.

// ErrCardBusy is wrapped by the error of a claim whose card has another
// layout and claims of this driver on it: the card is not laid out again.
var ErrCardBusy = errors.New("the card holds a layout other claims use")

// ErrLayoutUnfinished is wrapped by the error of a claim on a card whose
// last re-layout could not be finished or put back.
var ErrLayoutUnfinished = errors.New("the card's last re-layout is unfinished")

// slotTarget is what a dynamic device name stands for.
type slotTarget struct {
	card dynamicCard
	// count is the card's VF count the device needs (0: the whole card),
	// slot the VF's position.
	count, slot int
}

// dynamicTargets maps every dynamic device name of h's cards to its card,
// count and slot.
func dynamicTargets(h *discover.Host) map[string]slotTarget {
	out := map[string]slotTarget{}
	if h == nil {
		return out
	}
	for _, c := range dynamicCards(h) {
		out[CardName(c.ordinal)] = slotTarget{card: c}
		for _, n := range c.card.Allowed[1:] {
			for slot := range n {
				out[SlotName(c.ordinal, n, slot)] = slotTarget{card: c, count: n, slot: slot}
			}
		}
	}
	return out
}

// parseDynamicName reads a dynamic device name: the card's ordinal, the
// count (0 for the whole card) and the slot. false for any other name.
func parseDynamicName(name string) (card, count, slot int, ok bool) {
	return names.ParseDRAPartitionDevice(name)
}

// cardHolder is a prepared device of this driver on a card.
type cardHolder struct {
	claim  string // namespace/name; "" for the claim being prepared
	device string
	count  int
}

// holdersOf returns the prepared devices of pool on the card with ordinal
// card, of claims other than uid, then of earlier (the devices of the
// claim being prepared so far).
func (d *Driver) holdersOf(card int, uid types.UID, earlier []preparedDevice) []cardHolder {
	var out []cardHolder
	add := func(claim string, devs []preparedDevice) {
		for _, pd := range devs {
			c, n, _, ok := parseDynamicName(pd.Device)
			if ok && c == card && pd.Pool == d.o.NodeName {
				out = append(out, cardHolder{claim: claim, device: pd.Device, count: n})
			}
		}
	}
	uids := make([]string, 0, len(d.claims.claims))
	for u := range d.claims.claims {
		if u != uid {
			uids = append(uids, string(u))
		}
	}
	slices.Sort(uids)
	for _, u := range uids {
		c := d.claims.claims[types.UID(u)]
		add(c.String(), c.Devices)
	}
	add("", earlier)
	return out
}

// describeHolders names the claims of holders: "claims ns/a, ns/b".
func describeHolders(holders []cardHolder, self string) string {
	var held []string
	for _, h := range holders {
		n := h.claim
		if n == "" {
			n = self + " (its other request)"
		}
		if !slices.Contains(held, n) {
			held = append(held, n)
		}
	}
	if len(held) == 1 {
		return "claim " + held[0]
	}
	return "claims " + strings.Join(held, ", ")
}

// describeCount is a card's count as the errors say it.
func describeCount(n int) string {
	if n == 0 {
		return "the whole card (0 VFs)"
	}
	return strconv.Itoa(n) + " VFs"
}

// prepareDynamicDevice prepares one allocated device of dynamic mode: t is
// what its name stands for on the host as scanned, earlier the devices of
// the claim already prepared in this call. It returns the CDI device
// naming the function.
func (d *Driver) prepareDynamicDevice(ctx context.Context, claim *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult, t slotTarget, h *discover.Host, offered map[string]bool, earlier []preparedDevice) (string, error) {
	addr := t.card.card.Address
	self := claim.Namespace + "/" + claim.Name
	if err := d.layouts.bad[addr]; err != nil {
		return "", fmt.Errorf("card %s: %w: %w (check the card's layout, then remove the record)", addr, ErrLayoutUnfinished, err)
	}
	if rec := d.layouts.get(addr); rec != nil && rec.Phase == phaseStarted {
		return "", fmt.Errorf("card %s: %w (from %d to %d VFs for claim %s): not touched until it is; see the driver's log", addr, ErrLayoutUnfinished, rec.From, rec.To, rec.Claim)
	}
	if taint, ok := d.taintOf(t.card.pf, h); ok && !tolerates(r.Tolerations, taint) {
		return "", fmt.Errorf("%w: card %s: %s (tainted %s=%s:%s, which the allocation does not tolerate)",
			ErrDeviceUnhealthy, addr, t.card.pf.Reason, taint.Key, taint.Value, taint.Effect)
	}
	holders := d.holdersOf(t.card.ordinal, claim.UID, earlier)
	have := t.card.card.NumVFs
	wantText := describeCount(t.count)
	if t.count > 0 {
		wantText = fmt.Sprintf("%d VFs (its slot %d)", t.count, t.slot)
	}
	switch {
	case have == t.count:
		admin := r.AdminAccess != nil && *r.AdminAccess
		for _, o := range holders {
			if o.device == r.Device && !admin || t.count == 0 {
				return "", fmt.Errorf("%w %s until the kubelet unprepares that claim (a deleted pod's container may still run; the kubelet retries)", ErrDeviceInUse, describeHolders([]cardHolder{o}, self))
			}
		}
	case len(holders) > 0:
		return "", fmt.Errorf("%w: card %s holds %s for %s; the claim wants %s (the kubelet retries once they are unprepared)",
			ErrCardBusy, addr, describeCount(have), describeHolders(holders, self), wantText)
	default:
		if err := d.relayoutCard(ctx, self, claim.UID, addr, have, t.count); err != nil {
			return "", fmt.Errorf("card %s has %s, the claim wants %s: %w", addr, describeCount(have), wantText, err)
		}
		sc := d.scanner.Scan()
		if sc.Host == nil {
			return "", fmt.Errorf("reading the node after laying out card %s: %w", addr, sc.Err)
		}
		h, offered = sc.Host, sc.Names
	}
	fn := addr
	if t.count > 0 {
		vfs, err := sriov.VirtFns(h.DevRoot, addr)
		if err != nil {
			return "", fmt.Errorf("finding the VF of slot %d of card %s: %w", t.slot, addr, err)
		}
		if len(vfs) != t.count {
			return "", fmt.Errorf("card %s shows %d VFs, not the claim's %d", addr, len(vfs), t.count)
		}
		fn = vfs[t.slot]
	}
	vendor, class := parser.ParseQualifier(d.o.Kind)
	if !offered[fn] {
		return "", fmt.Errorf("%w: no spec of kind %s in %s names %s (dynamic mode needs the node spec's PCI-address names, which --device-name-strategy bdf gives and the default includes: %s)",
			ErrNoSpec, d.o.Kind, strings.Join(d.scanner.SpecDirs(), ", "), parser.QualifiedName(vendor, class, fn), xpunode.SpecHint(d.o.Kind))
	}
	return parser.QualifiedName(vendor, class, fn), nil
}

// relayoutCard takes the card at addr from `from` to `to` VFs for the
// claim self, recording the re-layout before the first write and after
// the last.
func (d *Driver) relayoutCard(ctx context.Context, self string, uid types.UID, addr string, from, to int) error {
	if d.o.relayout == nil {
		return errors.New("this driver lays out no card (no SR-IOV writer configured)")
	}
	rec := &layoutRecord{Card: addr, From: from, To: to, Claim: self, ClaimUID: uid, Phase: phaseStarted}
	if err := d.layouts.put(rec); err != nil {
		return err
	}
	d.o.Log.Infof("laying out card %s for claim %s: %d VFs -> %d VFs", addr, self, from, to)
	err := d.o.relayout(ctx, addr, to)
	if err != nil {
		// The writer puts a card that failed back to its old count; a
		// card found so is done with, any other is finished (or put
		// back) before the card is touched again.
		if now, ok := d.countOf(addr); ok && now == from {
			rec.Phase, rec.RolledBack = phaseCompleted, true
			err = errors.Join(err, d.layouts.put(rec))
		}
		return err
	}
	rec.Phase = phaseCompleted
	return d.layouts.put(rec)
}

// countOf returns the VF count the card at addr has with every VF's node
// there (the kernel and udev done), false when it is between counts or
// not found.
func (d *Driver) countOf(addr string) (int, bool) {
	h, err := d.o.Discover()
	if err != nil {
		return 0, false
	}
	for _, c := range partition.Cards(h) {
		if c.Address != addr {
			continue
		}
		vfs, err := sriov.VirtFns(h.DevRoot, addr)
		if err != nil || len(vfs) != c.NumVFs || len(c.VFs) != c.NumVFs {
			return 0, false
		}
		return c.NumVFs, true
	}
	return 0, false
}

// finishLayouts completes or rolls back the re-layouts recorded as
// started: a card at its new count with every VF there keeps it, a card at
// its old count stays, any other is put back to its old count. It returns
// whether it found any to finish, and what could not be finished; those
// cards are refused until it can.
func (d *Driver) finishLayouts(ctx context.Context) (bool, error) {
	if err := d.layouts.load(); err != nil {
		return false, err
	}
	var errs []error
	started := d.layouts.started()
	for _, rec := range started {
		now, settled := d.countOf(rec.Card)
		switch {
		case settled && now == rec.To:
			d.o.Log.Infof("card %s: its re-layout from %d to %d VFs for claim %s was done before the driver stopped: kept", rec.Card, rec.From, rec.To, rec.Claim)
			rec.Phase = phaseCompleted
		case settled && now == rec.From:
			d.o.Log.Infof("card %s: its re-layout from %d to %d VFs for claim %s had not changed it when the driver stopped: kept at %d VFs", rec.Card, rec.From, rec.To, rec.Claim, rec.From)
			rec.Phase, rec.RolledBack = phaseCompleted, true
		default:
			d.o.Log.Warnf("card %s: its re-layout from %d to %d VFs for claim %s stopped half way: putting it back to %d VFs", rec.Card, rec.From, rec.To, rec.Claim, rec.From)
			if d.o.relayout == nil {
				errs = append(errs, fmt.Errorf("card %s: %w, and this driver lays out no card", rec.Card, ErrLayoutUnfinished))
				continue
			}
			if err := d.o.relayout(ctx, rec.Card, rec.From); err != nil {
				errs = append(errs, fmt.Errorf("putting card %s back to %d VFs: %w", rec.Card, rec.From, err))
				continue
			}
			rec.Phase, rec.RolledBack = phaseCompleted, true
		}
		if err := d.layouts.put(rec); err != nil {
			errs = append(errs, err)
		}
	}
	return len(started) > 0, errors.Join(errs...)
}

// idleCards returns, with IdleWhole, the cards of devs (devices of a claim
// just unprepared) that no claim holds any more to whole.
func (d *Driver) idleCards(ctx context.Context, devs []preparedDevice) {
	if !d.o.IdleWhole || d.o.relayout == nil {
		return
	}
	var cards []int
	for _, pd := range devs {
		if c, n, _, ok := parseDynamicName(pd.Device); ok && n > 0 && pd.Pool == d.o.NodeName && !slices.Contains(cards, c) {
			cards = append(cards, c)
		}
	}
	if len(cards) == 0 {
		return
	}
	sc := d.scanner.Scan()
	if sc.Host == nil {
		return
	}
	for _, dc := range dynamicCards(sc.Host) {
		if !slices.Contains(cards, dc.ordinal) || dc.card.NumVFs == 0 || len(d.holdersOf(dc.ordinal, "", nil)) > 0 {
			continue
		}
		if err := d.relayoutCard(ctx, "(idle: --idle-layout=whole)", "", dc.card.Address, dc.card.NumVFs, 0); err != nil {
			d.o.Log.Warnf("returning the idle card %s to whole: %v (it keeps its %d VFs)", dc.card.Address, err, dc.card.NumVFs)
		}
	}
}

// reconcile makes the cards' layouts and the recorded claims agree at
// start, after finishLayouts and the sweep: a card that no claim holds
// and that has VFs keeps them by default (the next claim of their size
// takes them without a write), and with IdleWhole goes back to whole
// (through the writer, so not while a process or a pod holds it). A
// claim recorded on a slot whose card now has another count (laid out by
// someone else while the driver was down) is logged: nothing it may
// still use is touched. d.mu must be held.
func (d *Driver) reconcile(ctx context.Context) {
	sc := d.scanner.Scan()
	if sc.Host == nil {
		return
	}
	for _, dc := range dynamicCards(sc.Host) {
		addr := dc.card.Address
		if d.layouts.bad[addr] != nil {
			continue
		}
		if rec := d.layouts.get(addr); rec != nil && rec.Phase == phaseStarted {
			continue
		}
		holders := d.holdersOf(dc.ordinal, "", nil)
		for _, h := range holders {
			if h.count != dc.card.NumVFs {
				d.o.Log.Warnf("card %s has %s, but claim %s is recorded with its device %s (%s): the card was laid out again while the driver was down; it is not touched until that claim is unprepared",
					addr, describeCount(dc.card.NumVFs), h.claim, h.device, describeCount(h.count))
			}
		}
		if len(holders) > 0 || dc.card.NumVFs == 0 || !d.o.IdleWhole || d.o.relayout == nil {
			continue
		}
		if err := d.relayoutCard(ctx, "(idle at start: --idle-layout=whole)", "", addr, dc.card.NumVFs, 0); err != nil {
			d.o.Log.Warnf("returning the idle card %s to whole at start: %v (it keeps its %d VFs)", addr, err, dc.card.NumVFs)
		}
	}
}

// applyLayout is the default relayout: sriov.Apply of the one card, with
// its checks of who holds it, under the node's layout lock.
func applyLayout(c sriov.Config) func(ctx context.Context, addr string, n int) error {
	return func(ctx context.Context, addr string, n int) error {
		_, err := sriov.Apply(ctx, c, partition.Layout{{Selector: addr, VFs: n}})
		return err
	}
}
