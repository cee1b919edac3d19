package dra

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Phases of a layout record.
const (
	phaseStarted   = "PrepareStarted"
	phaseCompleted = "PrepareCompleted"
)

// layoutRecord is the record of the last re-layout of one card by the
// driver: written PrepareStarted before the first write to the card's
// sriov_numvfs, PrepareCompleted once the card is at To, or back at From
// (RolledBack).
type layoutRecord struct {
	Version    int       `json:"version"`
	Phase      string    `json:"phase"`
	Card       string    `json:"card"`
	From       int       `json:"from"`
	To         int       `json:"to"`
	Claim      string    `json:"claim"`
	ClaimUID   types.UID `json:"claimUID,omitempty"`
	RolledBack bool      `json:"rolledBack,omitempty"`
}

const (
	layoutRecordVersion = 1
	layoutPrefix        = "layout-"
	// maxLayoutRecord bounds the read of one record.
	maxLayoutRecord = 4096
)

// layoutJournal keeps one record per card, in the claim state directory
// (layout-ADDRESS.json, which the claim store's UID names never match),
// or in memory when there is none.
type layoutJournal struct {
	dir  string
	recs map[string]*layoutRecord
	// bad are the cards whose record cannot be read, with why: what the
	// driver last did to them is not known, so they are not touched.
	bad map[string]error
}

func newLayoutJournal(dir string) *layoutJournal {
	return &layoutJournal{dir: dir, recs: map[string]*layoutRecord{}, bad: map[string]error{}}
}

func (j *layoutJournal) path(addr string) (string, error) {
	if !discover.IsPCIAddress(addr) {
		return "", fmt.Errorf("layout record of %q: not a PCI address", addr)
	}
	return filepath.Join(j.dir, layoutPrefix+addr+".json"), nil
}

// load reads the records of dir again.
func (j *layoutJournal) load() error {
	if j.dir == "" {
		return nil
	}
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return fmt.Errorf("reading the claim state directory %s: %w", j.dir, err)
	}
	recs, bad := map[string]*layoutRecord{}, map[string]error{}
	for _, e := range entries {
		addr, ok := strings.CutPrefix(strings.TrimSuffix(e.Name(), ".json"), layoutPrefix)
		if !ok || !strings.HasSuffix(e.Name(), ".json") || !discover.IsPCIAddress(addr) {
			continue
		}
		path := filepath.Join(j.dir, e.Name())
		if !e.Type().IsRegular() {
			bad[addr] = fmt.Errorf("layout record %s: %w", path, fdio.ErrNotRegular)
			continue
		}
		rec, err := readLayoutRecord(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && rec.Card != addr {
			err = fmt.Errorf("layout record %s is of card %q", path, rec.Card)
		}
		if err != nil {
			bad[addr] = err
			continue
		}
		recs[addr] = rec
	}
	j.recs, j.bad = recs, bad
	return nil
}

func readLayoutRecord(path string) (*layoutRecord, error) {
	var rec layoutRecord
	if err := readRecord(path, maxLayoutRecord, &rec); err != nil {
		return nil, fmt.Errorf("reading the layout record: %w", err)
	}
	switch {
	case rec.Version != layoutRecordVersion:
		return nil, fmt.Errorf("%w: layout record %s has version %d, this driver reads version %d", ErrRecordVersion, path, rec.Version, layoutRecordVersion)
	case rec.Phase != phaseStarted && rec.Phase != phaseCompleted:
		return nil, fmt.Errorf("layout record %s: phase %q is neither %s nor %s", path, rec.Phase, phaseStarted, phaseCompleted)
	}
	return &rec, nil
}

func (j *layoutJournal) get(addr string) *layoutRecord { return j.recs[addr] }

// started returns the records left PrepareStarted, by card.
func (j *layoutJournal) started() []*layoutRecord {
	var out []*layoutRecord
	for _, r := range j.recs {
		if r.Phase == phaseStarted {
			c := *r
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *layoutRecord) int { return strings.Compare(a.Card, b.Card) })
	return out
}

// put records rec (atomically: a crash leaves the old record or the new
// one); on error nothing changed.
func (j *layoutJournal) put(rec *layoutRecord) error {
	rec.Version = layoutRecordVersion
	if j.dir != "" {
		path, err := j.path(rec.Card)
		if err != nil {
			return err
		}
		if err := writeRecord(path, rec); err != nil {
			return fmt.Errorf("recording the re-layout of card %s: %w", rec.Card, err)
		}
	}
	c := *rec
	j.recs[rec.Card] = &c
	return nil
}
