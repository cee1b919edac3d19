package partition

import (
	"context"
	"fmt"
)

// Assert checks l against the node as it is now, writing nothing and asking
// nobody who uses the cards: the layout is planned as Apply plans it (an
// invalid layout is the same error), and the changes returned are the cards
// whose VF count differs from the layout's, in card order. None means the
// node matches.
func Assert(_ context.Context, c Config, l Layout) ([]Change, error) {
	c = c.WithDefaults()
	_, _, changes, err := c.Plan(l)
	if err != nil {
		return nil, err
	}
	var differ []Change
	for _, ch := range changes {
		if ch.From != ch.To {
			differ = append(differ, ch)
		}
	}
	return differ, nil
}

// Export returns the node's layout now, in canonical form (Current).
func Export(_ context.Context, c Config) (Layout, error) {
	c = c.WithDefaults()
	h, err := c.Discover()
	if err != nil {
		return nil, err
	}
	if len(Cards(h)) == 0 {
		return nil, fmt.Errorf("no card with a PCI function found under %s (%d device nodes): no layout to export", h.DevRoot, len(h.Devices))
	}
	return Current(h), nil
}
