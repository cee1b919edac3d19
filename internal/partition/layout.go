package partition

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// SelectorAll selects every card of the node.
const SelectorAll = "all"

// maxVFs bounds a count in a layout: no SR-IOV capability has more VFs
// than a PCI bus has functions.
const maxVFs = 256

// maxEntries bounds the entries of a layout (a label or a config file line
// is host- or user-controlled input).
const maxEntries = 1024

// Entry is one SELECTOR=N of a layout.
type Entry struct {
	// Selector is SelectorAll, a card index (the N of the PF's /dev/xpuN)
	// or a PF's PCI address in the kernel's form (0000:3b:00.0).
	Selector string
	// VFs is the number of partitions; 0 is the whole card.
	VFs int
}

// Layout is a list of entries; where two select the same card, the later
// one wins.
type Layout []Entry

// ParseLayout reads a layout as the --layout flag and partitions.conf
// write it: comma-separated SELECTOR=N, e.g. "all=2,0000:3b:00.0=4".
func ParseLayout(s string) (Layout, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty layout: give SELECTOR=N entries, e.g. all=2 or all=2,0000:3b:00.0=4 (N=0: the whole card)")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxEntries {
		return nil, fmt.Errorf("layout has %d entries, more than %d", len(parts), maxEntries)
	}
	l := make(Layout, 0, len(parts))
	for _, p := range parts {
		e, err := parseEntry(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		l = append(l, e)
	}
	return l, nil
}

func parseEntry(p string) (Entry, error) {
	sel, n, ok := strings.Cut(p, "=")
	if !ok {
		return Entry{}, fmt.Errorf("layout entry %q is not SELECTOR=N (SELECTOR: all, a card index or a PCI address such as 0000:3b:00.0)", p)
	}
	sel, n = strings.TrimSpace(sel), strings.TrimSpace(n)
	e := Entry{Selector: strings.ToLower(sel)}
	if err := checkSelector(e.Selector); err != nil {
		return Entry{}, fmt.Errorf("layout entry %q: %w", p, err)
	}
	vfs, err := strconv.Atoi(n)
	if err != nil || vfs < 0 || vfs > maxVFs || n != strconv.Itoa(vfs) {
		return Entry{}, fmt.Errorf("layout entry %q: %q is not a number of VFs (0 for the whole card, at most %d)", p, n, maxVFs)
	}
	e.VFs = vfs
	return e, nil
}

func checkSelector(sel string) error {
	switch {
	case sel == SelectorAll:
		return nil
	case discover.IsPCIAddress(sel):
		return nil
	case sel == "":
		return errors.New("empty selector")
	}
	i, err := strconv.Atoi(sel)
	if err != nil || i < 0 || sel != strconv.Itoa(i) {
		return fmt.Errorf("selector %q is neither %q, a card index nor a PCI address in the form 0000:3b:00.0", sel, SelectorAll)
	}
	return nil
}

// String writes l as ParseLayout reads it.
func (l Layout) String() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Selector + "=" + strconv.Itoa(e.VFs)
	}
	return strings.Join(parts, ",")
}

// A label value holds only letters, digits, '-', '_' and '.', at most 63
// of them: the label form of a layout writes ',' as '_', '=' as '-' and
// the ':' of a PCI address as '.' (all=2,0000:3b:00.0=4 is
// all-2_0000.3b.00.0-4). No selector holds '-' or '_', so the form reads
// back unambiguously.
const maxLabelValue = 63

// LabelValue writes l in its label form; an error when it does not fit a
// label value.
func (l Layout) LabelValue() (string, error) {
	v := strings.NewReplacer(",", "_", "=", "-", ":", ".").Replace(l.String())
	if len(v) > maxLabelValue {
		return "", fmt.Errorf("layout %s is %d characters in its label form, more than a label value's %d: select cards by index or all", l, len(v), maxLabelValue)
	}
	return v, nil
}

// LabelNamePrefix starts a label value that names a layout of a file of
// named layouts instead of giving one: name.NAME. No layout's label form
// starts with it: every entry of one is SELECTOR-N, and a selector is
// "all", a card index or a PCI address.
const LabelNamePrefix = "name."

// LabelLayoutName returns the NAME of a label value name.NAME, and
// whether v is one; the error says why NAME is not a layout's name.
func LabelLayoutName(v string) (string, bool, error) {
	name, ok := strings.CutPrefix(v, LabelNamePrefix)
	if !ok {
		return "", false, nil
	}
	if err := checkName(name); err != nil {
		return "", true, fmt.Errorf("label value %q names a layout (%sNAME): %w", v, LabelNamePrefix, err)
	}
	return name, true, nil
}

// ParseLabelValue reads a layout from its label form (LabelValue).
// Only the characters of a label value are taken, so that the value is
// read in its label form and nothing else (no ',', '=' or ':' of a
// --layout, no spaces).
func ParseLabelValue(v string) (Layout, error) {
	if len(v) > maxLabelValue {
		return nil, fmt.Errorf("label value %q is longer than %d characters", v, maxLabelValue)
	}
	if v == "" {
		return nil, errors.New("empty layout label: write entries as SELECTOR-N joined by '_', e.g. all-2 or all-2_0000.3b.00.0-4")
	}
	if i := strings.IndexFunc(v, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' && r != '_' && r != '.'
	}); i >= 0 {
		return nil, fmt.Errorf("layout label %q: %q at %d is not a character of a label value (letters, digits, '-', '_', '.'; entries as SELECTOR-N joined by '_', e.g. all-2_0000.3b.00.0-4)", v, v[i:i+1], i)
	}
	entries := strings.Split(v, "_")
	for i, e := range entries {
		sel, n, ok := strings.Cut(e, "-")
		if !ok {
			return nil, fmt.Errorf("layout label %q: entry %q is not SELECTOR-N (e.g. all-2, 3-4, 0000.3b.00.0-4)", v, e)
		}
		if strings.Count(sel, ".") == 3 {
			// dddd.bb.dd.f: the first two dots were colons.
			sel = strings.Replace(sel, ".", ":", 2)
		}
		entries[i] = sel + "=" + n
	}
	l, err := ParseLayout(strings.Join(entries, ","))
	if err != nil {
		return nil, fmt.Errorf("layout label %q: %w", v, err)
	}
	return l, nil
}
