package sriov

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// ErrInUse is wrapped by Apply's error for a card a process or a container
// holds.
var ErrInUse = errors.New("card in use")

// CardReport is what Apply did to one card.
type CardReport struct {
	Index   int    `json:"index"`
	Address string `json:"address"`
	// Before is the VF count Apply found, Want the layout's, After the
	// count the card has when Apply is done (in a dry run, the count it
	// would have).
	Before int `json:"before"`
	Want   int `json:"want"`
	After  int `json:"after"`
	// Writes are the values written to sriov_numvfs, in order (rollback
	// included); in a dry run, the values Apply would write.
	Writes []int `json:"writes,omitempty"`
	// RolledBack says the card failed and was put back to Before.
	RolledBack bool `json:"rolledBack,omitempty"`
	// Held says the card was found held right before its first write,
	// and was not written.
	Held bool `json:"held,omitempty"`
	// Error is why the card failed.
	Error string `json:"error,omitempty"`
}

// Changed reports whether the card had to change.
func (r CardReport) Changed() bool { return r.Before != r.Want }

// Report is what Apply did.
type Report struct {
	// Layout is the layout asked, Before and After the node's in
	// canonical form (Current): After is the node's layout when Apply is
	// done (in a dry run, the layout it would have; after a refusal, the
	// node's layout as it is).
	Layout string `json:"layout"`
	Before string `json:"before"`
	After  string `json:"after"`
	DryRun bool   `json:"dryRun,omitempty"`
	// Cards are every card of the node, in card order.
	Cards []CardReport `json:"cards"`
	// HandlesUsed is the node's device handles when Apply is done (in a
	// dry run, the handles of the layout; after a refusal, the handles
	// used now), of HandleLimit.
	HandlesUsed int `json:"handlesUsed"`
	HandleLimit int `json:"handleLimit"`
	// HandlesBefore is the handles the node used when Apply began.
	HandlesBefore int `json:"handlesBefore"`
	// Refused says the layout was refused before anything was written;
	// Before, After and the handles are the node's as it is.
	Refused bool     `json:"refused,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// Changed reports whether any card had to change.
func (r *Report) Changed() bool {
	return slices.ContainsFunc(r.Cards, CardReport.Changed)
}

// Apply lays the node's cards out as l. The whole layout is checked first
// (Plan); a layout that changes nothing returns at once, with no lock
// taken. A card to change that is in use is refused, or waited for
// (Config.Wait). Then Apply takes the node's layout lock (LockLayout,
// below the host root: applies take turns; not for a dry run), and plans
// and checks the holders again under it: another apply may have laid the
// node out meanwhile. Right before the first write to each card, who
// holds that card is checked once more (processes and PodResources): a
// card opened since is refused with ErrInUse, naming the holder, the
// cards before it stay as written and the cards after it are not touched.
// Each card to change gets 0 (when it has VFs) and then its new count
// written to sriov_numvfs, and after each write Apply waits
// (Config.Settle) until the kernel shows the result: the virtfn links,
// the VF functions and their /dev/xpuN nodes. A card that fails is put
// back to its previous count and the cards after it are not touched. A
// card already at its count is not written. Once a card changed (also
// when a later one failed), AfterApply runs with the new host. The report
// says what was done, also with an error.
func Apply(ctx context.Context, c Config, l partition.Layout) (*Report, error) {
	c = c.withDefaults()
	deadline := time.Now().Add(c.Wait)
	h, cards, changes, err := c.Plan(l)
	if err != nil {
		return c.refusedReport(l, h, cards), err
	}
	rep := newReport(l, cards, changes, c.DryRun)
	if !rep.Changed() {
		c.Log.Infof("the node is already laid out as %s: nothing to do", l)
		return rep, nil
	}
	// Who may write, before anything is tried or waited for: a process
	// that may not write sriov_numvfs learns so at once, not after a wait
	// and a failed write.
	privErr := c.checkWritable(h, changes)
	if privErr != nil && !c.DryRun {
		rep.Refused = true
		return rep, privErr
	}
	// The holders first, without the lock: a card in use is refused
	// (or waited for) without keeping another apply waiting.
	_, cards, changes, err = c.waitFree(ctx, deadline, h, cards, changes, l, rep)
	if err != nil {
		return c.refused(l, rep), err
	}
	notes := rep.Notes
	rep = newReport(l, cards, changes, c.DryRun)
	rep.Notes = notes
	if privErr != nil {
		rep.Notes = append(rep.Notes, "this process could not apply the layout: "+privErr.Error())
	}
	if c.DryRun || !rep.Changed() {
		return rep, nil
	}
	if c.hooks != nil && c.hooks.beforeLock != nil {
		c.hooks.beforeLock()
	}
	// One apply at a time per node, from the plan under the lock to the
	// last write and the spec.
	lock, err := LockLayout(ctx, c.lockRoot(), max(c.Wait, c.Settle))
	if err != nil {
		return c.refused(l, rep), err
	}
	defer lock.Unlock()
	if h, cards, changes, err = c.Plan(l); err != nil {
		return c.refusedReport(l, h, cards), err
	}
	rep = newReport(l, cards, changes, c.DryRun)
	if !rep.Changed() {
		c.Log.Infof("the node was laid out as %s meanwhile: nothing to do", l)
		return rep, nil
	}
	if h, cards, changes, err = c.waitFree(ctx, deadline, h, cards, changes, l, rep); err != nil {
		return c.refused(l, rep), err
	}
	notes = rep.Notes
	rep = newReport(l, cards, changes, c.DryRun)
	rep.Notes = notes
	if !rep.Changed() {
		return rep, nil
	}
	sys, err := openSysfs(h.DevRoot)
	if err != nil {
		return rep, err
	}
	defer sys.close()
	// The cards to change are withheld from the device plugin's and the
	// DRA driver's scans from now until the lock is released: between
	// the writes a card is whole and its VFs come and go.
	var changing []string
	for _, ch := range changes {
		if ch.From != ch.To {
			changing = append(changing, ch.Card.Address)
		}
	}
	if err := lock.Announce(changing); err != nil {
		return rep, err
	}
	failed := c.writeCards(ctx, sys, changes, rep)
	return c.finish(l, rep, failed)
}

// writeCards writes the changes card by card, each checked free right
// before its first write, and stops at the first that fails; rep's cards
// record what happened.
func (c Config) writeCards(ctx context.Context, sys *sysfs, changes []partition.Change, rep *Report) error {
	var failed error
	for i, ch := range changes {
		if ch.From == ch.To {
			continue
		}
		r := &rep.Cards[i]
		if c.hooks != nil && c.hooks.beforeCard != nil {
			c.hooks.beforeCard(ch.Card.Address)
		}
		// Right before the card's first write: a process or a pod may
		// have opened it during the writes to the cards before it.
		if err := c.checkFree(ctx, ch.Card.Address); err != nil {
			r.Error, r.Held = err.Error(), errors.Is(err, ErrInUse)
			failed = fmt.Errorf("%s: %w", ch.Card.Name(), err)
			break
		}
		if err := c.applyCard(ctx, sys, ch, r); err != nil {
			failed = fmt.Errorf("%s: %w", ch.Card.Name(), err)
			break
		}
	}
	if failed != nil && slices.ContainsFunc(rep.Cards, func(r CardReport) bool { return r.After != r.Before }) {
		failed = fmt.Errorf("%w (the cards before it are laid out as asked, the cards after it are as they were)", failed)
	}
	return failed
}

// finish reads the node after the writes into rep and, when a card
// changed, runs AfterApply (the spec follows the cards, also when a later
// card failed); failed is writeCards' error.
func (c Config) finish(l partition.Layout, rep *Report, failed error) (*Report, error) {
	after, err := c.Discover()
	if err != nil {
		return rep, errors.Join(failed, fmt.Errorf("reading the node after the layout: %w", err))
	}
	rep.After = partition.Current(after).String()
	rep.HandlesUsed, rep.HandleLimit = partition.Handles(partition.Cards(after))
	if c.AfterApply != nil && slices.ContainsFunc(rep.Cards, func(r CardReport) bool { return r.After != r.Before }) {
		// The spec follows the cards, also when a later card failed.
		if err := c.AfterApply(after); err != nil {
			if failed != nil {
				return rep, errors.Join(failed, err)
			}
			return rep, fmt.Errorf("the layout %s is applied, but: %w", l, err)
		}
	}
	return rep, failed
}

// checkFree looks, on a fresh discovery, for the holders of the card at
// addr (processes and PodResources): nil when it is free, else an error
// wrapping ErrInUse that names them (or says the process scan did not
// finish: a card not known to be free is not free).
func (c Config) checkFree(ctx context.Context, addr string) error {
	h, err := c.Discover()
	if err != nil {
		return fmt.Errorf("checking who holds the card before writing it: %w", err)
	}
	var one []partition.Card
	for _, card := range partition.Cards(h) {
		if card.Address == addr {
			one = append(one, card)
		}
	}
	if len(one) == 0 {
		return fmt.Errorf("the card at %s is gone from %s: not written", addr, h.DevRoot)
	}
	notes, partial, err := partition.FindUsers(ctx, c.Config, h, one)
	if err != nil {
		return fmt.Errorf("checking who holds the card before writing it: %w", err)
	}
	if partial && !c.IgnoreIncompleteScan {
		return fmt.Errorf("%w: the check of the processes holding it did not finish (%s), not written", ErrInUse, strings.Join(notes, "; "))
	}
	if partial {
		c.Log.Warnf("the check of the processes holding %s before its write did not finish, going on (--ignore-incomplete-scan): %s", addr, strings.Join(notes, "; "))
	}
	if len(one[0].InUse) > 0 {
		users := make([]string, len(one[0].InUse))
		for i, u := range one[0].InUse {
			users[i] = u.String()
		}
		return fmt.Errorf("%w: opened during the apply by %s, not written", ErrInUse, strings.Join(users, ", "))
	}
	return nil
}

// refused is the report of a refusal before any write: the node read
// again (it may have changed while Apply waited), with l planned on it,
// and the notes of rep. Where the node cannot be read again, rep.
func (c Config) refused(l partition.Layout, rep *Report) *Report {
	h, cards, changes, err := c.Plan(l)
	var fresh *Report
	if err == nil {
		fresh = newReport(l, cards, changes, false)
	} else {
		fresh = c.refusedReport(l, h, cards)
	}
	if fresh != nil {
		fresh.Notes, fresh.DryRun = rep.Notes, rep.DryRun
		rep = fresh
	}
	rep.Refused = true
	return rep
}

// refusedReport is the report of a layout Plan refused: the node as it
// is (its layout and handles), no card to change. Nil when the host could
// not be read.
func (c Config) refusedReport(l partition.Layout, h *discover.Host, cards []partition.Card) *Report {
	if h == nil || len(cards) == 0 {
		return nil
	}
	changes := make([]partition.Change, len(cards))
	for i, card := range cards {
		changes[i] = partition.Change{Card: card, From: card.NumVFs, To: card.NumVFs}
	}
	rep := newReport(l, cards, changes, false)
	rep.Refused = true
	return rep
}

// newReport is the report of the plan changes, before any write: the
// node as it is, or in a dry run as it would be.
func newReport(l partition.Layout, cards []partition.Card, changes []partition.Change, dry bool) *Report {
	rep := &Report{Layout: l.String(), Before: partition.LayoutOf(cards).String(), DryRun: dry}
	after := make([]partition.Card, len(cards))
	for i, ch := range changes {
		r := CardReport{Index: ch.Card.Index, Address: ch.Card.Address, Before: ch.From, Want: ch.To, After: ch.From}
		if dry && ch.From != ch.To {
			r.After, r.Writes = ch.To, countSteps(ch.From, ch.To)
		}
		rep.Cards = append(rep.Cards, r)
		after[i] = ch.Card
		after[i].NumVFs = ch.To
	}
	rep.After = rep.Before
	rep.HandlesUsed, rep.HandleLimit = partition.Handles(cards)
	rep.HandlesBefore = rep.HandlesUsed
	if dry {
		rep.After = partition.LayoutOf(after).String()
		rep.HandlesUsed, rep.HandleLimit = partition.Handles(after)
	}
	return rep
}

// countSteps are the values written to take a card from cur to n VFs:
// 0 first when it has VFs (the kernel refuses a nonzero count over
// another with EBUSY), then n.
func countSteps(cur, n int) []int {
	switch {
	case cur == n:
		return nil
	case cur > 0 && n > 0:
		return []int{0, n}
	}
	return []int{n}
}

// waitFree checks who holds the cards to change and, while any is held,
// looks again (discovering and planning afresh) until deadline. Its loop
// is its own, unlike settle's and LockLayout's (wait's pollers): its last
// look is at the deadline itself, so that --wait DURATION waits all of
// DURATION for a card freed just before it.
func (c Config) waitFree(ctx context.Context, deadline time.Time, h *discover.Host, cards []partition.Card, changes []partition.Change, l partition.Layout, rep *Report) (*discover.Host, []partition.Card, []partition.Change, error) {
	// The wait is reported once, with what it waits for, and then only
	// when that changes.
	start, last := time.Now(), ""
	for {
		notes, partial, err := partition.FindUsers(ctx, c.Config, h, cards)
		if err != nil {
			return nil, nil, nil, err
		}
		rep.Notes = notes
		busy := busyCards(changes, cards)
		if partial && slices.ContainsFunc(changes, func(ch partition.Change) bool { return ch.From != ch.To }) {
			// A process the scan did not look at may hold a card to
			// change: not known to be free is not free, unless the admin
			// says otherwise.
			if c.IgnoreIncompleteScan {
				c.Log.Warnf("the check of the processes holding the cards did not finish, going on (--ignore-incomplete-scan): %s", strings.Join(notes, "; "))
			} else {
				busy = append(busy, "the check of the processes holding the cards did not finish ("+strings.Join(notes, "; ")+"; --ignore-incomplete-scan applies the layout anyway)")
			}
		}
		if len(busy) == 0 {
			if last != "" {
				c.progress("the cards to change are free after %s", since(start))
			}
			return h, cards, changes, nil
		}
		if !time.Now().Before(deadline) {
			msg := strings.Join(busy, "; ")
			if c.Wait > 0 {
				return nil, nil, nil, fmt.Errorf("%w after waiting %s, nothing changed: %s", ErrInUse, c.Wait, msg)
			}
			return nil, nil, nil, fmt.Errorf("%w, nothing changed: %s", ErrInUse, msg)
		}
		switch msg := strings.Join(busy, "; "); {
		case last == "":
			c.progress("waiting up to %s for the cards to change to be free (checking every %s): %s", time.Until(deadline).Round(time.Second), waitInterval, msg)
			last = msg
		case msg != last:
			c.progress("after %s: %s", since(start), msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return nil, nil, nil, ctx.Err()
		case <-time.After(min(waitInterval, time.Until(deadline))):
		}
		if h, cards, changes, err = c.Plan(l); err != nil {
			return nil, nil, nil, err
		}
	}
}

// busyCards names the cards to change that are held, with their users.
func busyCards(changes []partition.Change, cards []partition.Card) []string {
	var out []string
	for i, ch := range changes {
		if ch.From == ch.To || len(cards[i].InUse) == 0 {
			continue
		}
		users := make([]string, len(cards[i].InUse))
		for j, u := range cards[i].InUse {
			users[j] = u.String()
		}
		out = append(out, fmt.Sprintf("%s is held by %s", cards[i].Name(), strings.Join(users, ", ")))
	}
	return out
}

// applyCard takes one card from ch.From to ch.To: 0 first when it has VFs,
// then the new count, each write waited for. On failure the card is put
// back to ch.From.
func (c Config) applyCard(ctx context.Context, sys *sysfs, ch partition.Change, r *CardReport) error {
	addr := ch.Card.Address
	name := ch.Card.Name()
	err := c.setCount(ctx, sys, name, addr, ch.To, r)
	if err == nil {
		r.After = ch.To
		c.progress("%s: %d VFs -> %d VFs, done", name, ch.From, ch.To)
		return nil
	}
	r.Error = err.Error()
	c.Log.Warnf("%s: %v; putting it back to %d VFs", name, err, ch.From)
	if rerr := c.setCount(context.WithoutCancel(ctx), sys, name, addr, ch.From, r); rerr != nil {
		now, _ := sys.readNumVFs(addr)
		r.After = now
		return fmt.Errorf("%w; putting it back to %d VFs failed too (it has %d now): %w", err, ch.From, now, rerr)
	}
	r.After, r.RolledBack = ch.From, true
	return fmt.Errorf("%w; put back to %d VFs", err, ch.From)
}

// setCount brings the PF at addr to n VFs: nothing when it has n, else 0
// first (the kernel refuses a nonzero count over another with EBUSY)
// and then n, each write waited for.
func (c Config) setCount(ctx context.Context, sys *sysfs, name, addr string, n int, r *CardReport) error {
	cur, err := sys.readNumVFs(addr)
	if err != nil {
		return err
	}
	if cur == n {
		return c.settle(ctx, sys, name, addr, n, nil)
	}
	for _, v := range countSteps(cur, n) {
		h, err := c.Discover()
		if err != nil {
			return err
		}
		old := vfNodes(h, addr)
		r.Writes = append(r.Writes, v)
		c.progress("%s: %s %d -> %d", name, attrNumVFs, cur, v)
		if err := sys.writeNumVFs(addr, v); err != nil {
			return err
		}
		if err := c.settle(ctx, sys, name, addr, v, old); err != nil {
			return err
		}
		cur = v
	}
	return nil
}

// vfNodes are the nodes of the VFs of the PF at addr.
func vfNodes(h *discover.Host, addr string) []string {
	var nodes []string
	for _, d := range h.Devices {
		if d.PCI != nil && d.PCI.Function == discover.FunctionVF && d.PCI.Parent == addr {
			nodes = append(nodes, d.Node.Path)
		}
	}
	return nodes
}

// settle waits, at most c.Settle, until the kernel shows n VFs of the PF
// at addr: sriov_numvfs reads n, virtfn0..n-1 lead to functions with
// physfn, and discovery finds exactly these n functions as VFs of the PF
// with a node each (udev creates the nodes after the kernel, and removes
// them after it too), and none of the nodes old the PF's VFs had before
// the write is left without its function: udev has removed it (else a
// new VF taking its index would look ready through the stale node, which
// udev then removes).
//
// The wait is reported (Config.Progress) when it starts, every
// progressEvery while it lasts, with what is not there yet, and with its
// total when it ends.
func (c Config) settle(ctx context.Context, sys *sysfs, name, addr string, n int, old []string) error {
	start := time.Now()
	next := start.Add(c.progressEvery)
	waited := false
	var why error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, c.Settle, true, func(context.Context) (bool, error) {
		if why = c.settled(sys, addr, n, old); why == nil {
			return true, nil
		}
		switch {
		case !waited:
			c.progress("%s: waiting for the kernel and udev to show %d VFs (at most %s)", name, n, c.Settle)
			waited = true
		case !time.Now().Before(next):
			c.progress("%s: still waiting for %d VFs after %s: %v", name, n, since(start), why)
			next = next.Add(c.progressEvery)
		}
		return false, nil
	})
	switch {
	case err == nil:
		if waited {
			c.progress("%s: the kernel and udev show %d VFs after %s", name, n, since(start))
		}
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	c.progress("%s: gave up waiting for %d VFs after %s: %v", name, n, since(start), why)
	return fmt.Errorf("the kernel did not show %d VFs within %s: %w", n, c.Settle, why)
}

// settled returns nil when the PF at addr shows n VFs, else what is not
// there yet.
func (c Config) settled(sys *sysfs, addr string, n int, old []string) error {
	cur, err := sys.readNumVFs(addr)
	if err != nil {
		return err
	}
	if cur != n {
		return fmt.Errorf("%s reads %d", sys.hostPath(pfDir(addr)+"/"+attrNumVFs), cur)
	}
	vfs, err := sys.virtfns(addr, n)
	if err != nil {
		return err
	}
	h, err := c.Discover()
	if err != nil {
		return err
	}
	var found []string
	for _, d := range h.Devices {
		if d.PCI != nil && d.PCI.Function == discover.FunctionVF && d.PCI.Parent == addr {
			found = append(found, d.PCI.Address)
		}
	}
	slices.Sort(found)
	want := slices.Sorted(slices.Values(vfs))
	if !slices.Equal(found, want) {
		return fmt.Errorf("the VF functions are %v, but the /dev/xpuN nodes of the VFs found are those of %v (udev not done?)", want, found)
	}
	for _, d := range h.Devices {
		if d.PCI == nil && slices.Contains(old, d.Node.Path) {
			return fmt.Errorf("%s, a node of a VF that is gone, is still there (udev not done?)", d.Node.Path)
		}
	}
	return nil
}

// since is the time since start, rounded for a progress line.
func since(start time.Time) time.Duration {
	return time.Since(start).Round(10 * time.Millisecond)
}
