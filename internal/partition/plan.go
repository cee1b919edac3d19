package partition

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Change is what a layout asks of one card.
type Change struct {
	Card Card
	// From is the card's VF count now, To the layout's.
	From, To int
}

// Plan resolves l against the cards (every entry in order: all, a card
// index or a PF's PCI address; a later entry overrides an earlier one for
// the cards it selects) and checks the whole result before anything is
// written: an unknown card, a card without SR-IOV asked for VFs, a count
// its board does not allow or above its sriov_totalvfs, and the node's
// handle budget. Every refusal names the card and the rule; all of them
// are returned together (errors.Join). The changes are in card order and
// include the cards that stay as they are (From == To).
func Plan(cards []Card, l Layout) ([]Change, error) {
	want := make([]int, len(cards))
	set := make([]bool, len(cards))
	for i, c := range cards {
		want[i] = c.NumVFs
	}
	var errs []error
	for _, e := range l {
		matched := false
		for i, c := range cards {
			if selects(e.Selector, c) {
				want[i], set[i], matched = e.VFs, true, true
			}
		}
		if !matched {
			errs = append(errs, fmt.Errorf("%s=%d: no such card on this node (cards: %s)", e.Selector, e.VFs, cardList(cards)))
		}
	}
	changes := make([]Change, len(cards))
	after := make([]Card, len(cards))
	for i, c := range cards {
		changes[i] = Change{Card: c, From: c.NumVFs, To: want[i]}
		after[i] = c
		after[i].NumVFs = want[i]
		if !set[i] || want[i] == c.NumVFs {
			continue
		}
		if err := checkCount(c, want[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if used, limit := Handles(after); limit > 0 && used > limit {
		errs = append(errs, fmt.Errorf("the layout needs %d device handles (every PF and every VF takes one: %s), more than the %d the %s driver supports per node: give fewer cards VFs, or fewer VFs",
			used, handleSum(after), limit, generationOf(after)))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return changes, nil
}

// selects reports whether the selector names the card.
func selects(sel string, c Card) bool {
	switch {
	case sel == SelectorAll:
		return true
	case discover.IsPCIAddress(sel):
		return sel == c.Address
	}
	i, err := strconv.Atoi(sel)
	return err == nil && c.Index >= 0 && i == c.Index
}

// checkCount checks one card's new VF count against its SR-IOV capability
// and its board's partition facts.
func checkCount(c Card, n int) error {
	if n == 0 {
		return nil
	}
	if c.TotalVFs <= 0 {
		return fmt.Errorf("%s (%s): %d VFs asked, but the card has no SR-IOV (no sriov_totalvfs): only 0, the whole card", c.Name(), c.Model, n)
	}
	m, ok := discover.PartitionModelOf(c.Board)
	if !ok {
		return fmt.Errorf("%s (%s): %d VFs asked, but nothing public says how a %s is partitioned: only 0, the whole card", c.Name(), c.Model, n, c.Board)
	}
	if !m.Allows(n) {
		return fmt.Errorf("%s (%s): %d VFs is not a layout of a %s: allowed %s", c.Name(), c.Model, n, c.Board, allowedList(c.Allowed))
	}
	if n > c.TotalVFs {
		return fmt.Errorf("%s (%s): %d VFs asked, more than its sriov_totalvfs %d: allowed %s", c.Name(), c.Model, n, c.TotalVFs, allowedList(c.Allowed))
	}
	return nil
}

func allowedList(a []int) string {
	s := make([]string, len(a))
	for i, n := range a {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

func cardList(cards []Card) string {
	s := make([]string, len(cards))
	for i, c := range cards {
		s[i] = c.selector()
		if c.Index >= 0 {
			s[i] += " " + c.Address
		}
	}
	return strings.Join(s, ", ")
}

// handleSum writes the handles of cards briefly: "8 PFs + 32 VFs".
func handleSum(cards []Card) string {
	vfs := 0
	for _, c := range cards {
		vfs += c.NumVFs
	}
	return fmt.Sprintf("%d PFs + %d VFs", len(cards), vfs)
}

func generationOf(cards []Card) string {
	for _, c := range cards {
		if discover.HandleLimit(c.Generation) > 0 {
			return c.Generation
		}
	}
	return ""
}

// Plan discovers the host and plans l on it (the function Plan), as
// Apply and Assert do.
func (c Config) Plan(l Layout) (*discover.Host, []Card, []Change, error) {
	h, err := c.Discover()
	if err != nil {
		return nil, nil, nil, err
	}
	cards := Cards(h)
	if len(cards) == 0 {
		return nil, nil, nil, fmt.Errorf("no card with a PCI function found under %s: nothing to lay out", h.DevRoot)
	}
	FillTotalVFs(h.DevRoot, cards)
	changes, err := Plan(cards, l)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("layout %s refused, nothing changed:\n%w", l, err)
	}
	return h, cards, changes, nil
}
