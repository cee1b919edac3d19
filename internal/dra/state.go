package dra

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// preparedDevice is one device of a prepared claim.
type preparedDevice struct {
	Request     string   `json:"request"`
	Pool        string   `json:"pool"`
	Device      string   `json:"device"`
	CDIDevices  []string `json:"cdiDevices"`
	AdminAccess bool     `json:"adminAccess,omitempty"`
}

// claimRecordVersion is the format of the claim records this driver
// writes. Records without a version (written before it existed) are
// version 1: the format did not change. A driver meeting a newer version
// (a downgrade) refuses to start rather than guess what the record holds:
// ignoring it could prepare a device that a claim still holds.
const claimRecordVersion = 1

// ErrRecordVersion is the error of a claim record of an unknown version.
var ErrRecordVersion = errors.New("claim record of a newer format")

// preparedClaim is what the driver records about a prepared claim: enough
// to answer Prepare again and to refuse a device of this claim to another.
type preparedClaim struct {
	Version   int              `json:"version"`
	UID       types.UID        `json:"uid"`
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []preparedDevice `json:"devices"`
}

func (c *preparedClaim) String() string { return c.Namespace + "/" + c.Name }

// claimStore keeps the prepared claims in memory and, when dir is set, one
// JSON file per claim in dir (written atomically, so a crash leaves the
// old record or the new one). dir is in the plugin's data directory under
// /var/lib/kubelet, which survives a reboot: the kubelet's checkpoint does
// too, and the two must agree.
//
// During a rolling update two drivers share dir (the helper library
// serializes their calls with a file lock), so each call starts from what
// is on disk (load), not from what this process last wrote.
type claimStore struct {
	dir    string
	log    logger.Interface
	claims map[types.UID]*preparedClaim
	// ignored are the unreadable records already warned about.
	ignored map[string]bool
}

// uidPattern bounds the file names: a claim UID is what the API server
// generated, but the store never joins unchecked text into a path.
var uidPattern = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9]{0,127}$`)

const claimSuffix = ".json"

func openClaimStore(dir string, log logger.Interface) (*claimStore, error) {
	s := &claimStore{dir: dir, log: log, claims: map[types.UID]*preparedClaim{}, ignored: map[string]bool{}}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the claim state directory %s: %w", dir, err)
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load reads the records of dir again, replacing what is in memory.
func (s *claimStore) load() error {
	if s.dir == "" {
		return nil
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("reading the claim state directory %s: %w", s.dir, err)
	}
	claims := make(map[types.UID]*preparedClaim, len(entries))
	for _, e := range entries {
		uid, ok := strings.CutSuffix(e.Name(), claimSuffix)
		if !ok || !e.Type().IsRegular() || !uidPattern.MatchString(uid) {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		c, err := readClaim(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by the other driver of a rolling update
		}
		if errors.Is(err, ErrRecordVersion) {
			return err
		}
		if err != nil || c.UID != types.UID(uid) {
			// Kept on disk for the operator; the claim is prepared again
			// when the kubelet asks and the record is then rewritten.
			if !s.ignored[path] {
				s.log.Warnf("ignoring the unreadable claim record %s: %v", path, errors.Join(err, mismatch(c, uid)))
				s.ignored[path] = true
			}
			continue
		}
		delete(s.ignored, path)
		claims[c.UID] = c
	}
	s.claims = claims
	return nil
}

func mismatch(c *preparedClaim, uid string) error {
	if c != nil && c.UID != types.UID(uid) {
		return fmt.Errorf("it records claim UID %q", c.UID)
	}
	return nil
}

func readClaim(path string) (*preparedClaim, error) {
	var c preparedClaim
	if err := readRecord(path, maxClaimRecord, &c); err != nil {
		return nil, err
	}
	switch {
	case c.Version == 0:
		c.Version = claimRecordVersion
	case c.Version > claimRecordVersion || c.Version < 0:
		return nil, fmt.Errorf("%w: %s has version %d, this driver reads up to version %d: it was written by a newer xpu-dra-driver; run that version again (or, once no pod uses the claim, remove the file)",
			ErrRecordVersion, path, c.Version, claimRecordVersion)
	}
	return &c, nil
}

func (s *claimStore) get(uid types.UID) *preparedClaim { return s.claims[uid] }

// owner returns the claim other than uid that holds device of pool without
// admin access, nil when none does.
func (s *claimStore) owner(pool, device string, uid types.UID) *preparedClaim {
	uids := make([]string, 0, len(s.claims))
	for u := range s.claims {
		uids = append(uids, string(u))
	}
	sort.Strings(uids)
	for _, u := range uids {
		c := s.claims[types.UID(u)]
		if c.UID == uid {
			continue
		}
		for _, d := range c.Devices {
			if d.Pool == pool && d.Device == device && !d.AdminAccess {
				return c
			}
		}
	}
	return nil
}

func (s *claimStore) path(uid types.UID) (string, error) {
	if !uidPattern.MatchString(string(uid)) {
		return "", fmt.Errorf("claim UID %q is not a UID", uid)
	}
	return filepath.Join(s.dir, string(uid)+claimSuffix), nil
}

// put records c; on error nothing changed.
func (s *claimStore) put(c *preparedClaim) error {
	c.Version = claimRecordVersion
	if s.dir != "" {
		path, err := s.path(c.UID)
		if err != nil {
			return err
		}
		if err := writeRecord(path, c); err != nil {
			return fmt.Errorf("recording prepared claim %s: %w", c, err)
		}
	}
	s.claims[c.UID] = c
	return nil
}

// remove forgets uid; a claim that is not recorded is not an error.
func (s *claimStore) remove(uid types.UID) error {
	if s.dir != "" {
		path, err := s.path(uid)
		if err != nil {
			return err
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the record of claim %s: %w", uid, err)
		}
	}
	delete(s.claims, uid)
	return nil
}
