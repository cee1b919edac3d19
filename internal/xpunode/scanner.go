package xpunode

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// ScannerConfig configures a Scanner. Discover and Empty are required.
type ScannerConfig struct {
	// Discover reads the host (discover.Discover with the command's roots).
	Discover func() (*discover.Host, error)
	// Kind is the CDI kind (vendor/class) of the node's spec; empty means
	// cdispec.DefaultKind.
	Kind string
	// SpecDirs are the CDI spec directories read as engines read them;
	// nil means the CDI library's defaults (/etc/cdi, /var/run/cdi).
	SpecDirs []string
	// NoSpecCheck leaves the specs alone: for a device plugin strategy
	// that hands out no CDI names (volume-mounts), a missing spec is no
	// reason for a device to be unhealthy.
	NoSpecCheck bool
	// Empty starts the message of a scan that offers nothing, as the
	// command says it: "advertising no baidu.com/xpu", "publishing an
	// empty ResourceSlice".
	Empty string
	// Unusable says what becomes of the devices no spec names, after
	// "no CDI spec ... names XPU(s) 0,1: ": "they are Unhealthy", "they
	// are tainted and cannot be prepared".
	Unusable string
	// Withheld returns the PCI addresses of the cards being laid out now
	// (partition.LayingOut below the host root): their devices are not
	// offered until it no longer names them (between the writes of a
	// re-layout a card is whole and its VFs come and go). Nil: none.
	Withheld func() ([]string, error)
	// Log gets each condition once, when it appears or changes; nil
	// discards.
	Log logger.Interface
}

// Scanner reads the host and the node's CDI specs into the offered
// devices with their health: the one scan of the device plugin, the DRA
// driver and the exporter. It logs a condition (no XPU, no spec, a stale
// spec, spec errors) when it appears or changes, not at every scan. Safe
// for concurrent use.
type Scanner struct {
	cfg   ScannerConfig
	specs *SpecChecker
	notes Notes
}

// Scan is the result of one read of the host and the specs.
type Scan struct {
	// Host is what discovery found; nil when it failed (Err says why).
	Host *discover.Host
	Err  error
	// Devices are the offered devices with their health; never nil, empty
	// when discovery failed.
	Devices []Device
	// Names are the device names of the kind the specs offer; nil when
	// the specs were not read (NoSpecCheck, or no device to name).
	Names map[string]bool
}

// NewScanner returns a scanner configured by cfg. It reads nothing yet.
func NewScanner(cfg ScannerConfig) *Scanner {
	if cfg.Kind == "" {
		cfg.Kind = cdispec.DefaultKind
	}
	if cfg.SpecDirs == nil {
		cfg.SpecDirs = cdiapi.DefaultSpecDirs
	}
	if cfg.Unusable == "" {
		cfg.Unusable = "they are Unhealthy"
	}
	cfg.Log = logger.OrDiscard(cfg.Log)
	s := &Scanner{cfg: cfg}
	if !cfg.NoSpecCheck {
		s.specs = NewSpecChecker(cfg.Kind, cfg.SpecDirs)
	}
	return s
}

// Kind is the CDI kind of the node's spec.
func (s *Scanner) Kind() string { return s.cfg.Kind }

// SpecDirs are the CDI spec directories the scanner reads.
func (s *Scanner) SpecDirs() []string { return s.cfg.SpecDirs }

func (s *Scanner) note(topic, msg string, logf func(string, ...any), cleared string) {
	s.notes.Note(s.cfg.Log, topic, msg, logf, cleared)
}

// Scan reads the host and the specs. It never fails: what cannot be read
// gives zero devices or unhealthy ones, and a log line. A device is
// unhealthy while the driver reports an error state for it, while the host
// has no /dev/xpuctrl, and (unless NoSpecCheck) while no spec names it.
func (s *Scanner) Scan() Scan {
	log := s.cfg.Log
	h, err := s.cfg.Discover()
	if err != nil {
		msg := fmt.Sprintf("%s: %v", s.cfg.Empty, err)
		if errors.Is(err, discover.ErrNoDevices) {
			msg = fmt.Sprintf("%s: %s (is the kunlun kernel module loaded? In a container, the host's /dev, /proc and /sys must be under --dev-root)", s.cfg.Empty, firstLine(err))
		}
		s.note("discover", msg, log.Warnf, "")
		return Scan{Err: err, Devices: []Device{}}
	}
	s.note("discover", "", log.Warnf, "")
	devs := s.withhold(DevicesOf(h))
	if len(devs) == 0 {
		s.note("compute", fmt.Sprintf("%s: every XPU under %s is a physical function with SR-IOV VFs enabled and no VF node exists", s.cfg.Empty, h.DevRoot), log.Warnf, "")
		return Scan{Host: h, Devices: devs}
	}
	s.note("compute", "", log.Warnf, "")
	RequireControl(h, devs)
	var names map[string]bool
	if s.specs != nil {
		names = s.checkSpecs(h, devs)
	}
	return Scan{Host: h, Devices: devs, Names: names}
}

// checkSpecs marks unhealthy the devices no spec names (the engine could
// not resolve them) and logs specs that do not match the host or that the
// CDI library rejects. It returns the names the specs offer.
func (s *Scanner) checkSpecs(h *discover.Host, devs []Device) map[string]bool {
	log, kind, dirs := s.cfg.Log, s.cfg.Kind, strings.Join(s.cfg.SpecDirs, ", ")
	names, stale, err := s.specs.Check(h)
	if err != nil {
		s.note("spec-errors", fmt.Sprintf("CDI spec errors (engines ignore these specs): %v", err), log.Warnf, "")
	} else {
		s.note("spec-errors", "", log.Warnf, "")
	}
	msg := ""
	switch missing := Unnamed(devs, names); {
	case len(names) == 0:
		msg = fmt.Sprintf("no CDI spec of kind %s in %s names XPU(s) %s (there is none): %s until one exists, since containers given them would fail to start; create it with: %s",
			kind, dirs, strings.Join(missing, ","), s.cfg.Unusable, SpecHint(kind))
	case len(missing) > 0:
		msg = fmt.Sprintf("no CDI spec of kind %s in %s names XPU(s) %s: %s until the spec is regenerated (check with xpu-cdi validate): %s",
			kind, dirs, strings.Join(missing, ","), s.cfg.Unusable, SpecHint(kind))
	}
	s.note("spec", msg, log.Errorf, fmt.Sprintf("the CDI specs of kind %s now name every XPU", kind))
	MarkUnhealthy(devs, func(id string) bool { return names[id] }, fmt.Sprintf("no CDI spec of kind %s names it", kind))
	msg = ""
	if len(stale) > 0 {
		msg = fmt.Sprintf("CDI spec of kind %s is stale against this host; run `xpu-cdi validate` for details and regenerate it: %s", kind, strings.Join(stale, "; "))
	}
	s.note("stale", msg, log.Warnf, "")
	return names
}

// withhold drops the devices of the cards being laid out (Withheld), with
// a note while there are any. A list that cannot be trusted or read is
// logged and withholds nothing: it is no reason to offer fewer devices.
func (s *Scanner) withhold(devs []Device) []Device {
	if s.cfg.Withheld == nil {
		return devs
	}
	log := s.cfg.Log
	cards, err := s.cfg.Withheld()
	if err != nil {
		s.note("withheld", fmt.Sprintf("the cards being laid out are not known, none withheld: %v", err), log.Warnf, "")
		return devs
	}
	var held []string
	kept := devs[:0:0]
	for _, d := range devs {
		if pci := d.XPU.PCI; pci != nil && (slices.Contains(cards, pci.Address) || slices.Contains(cards, pci.Parent)) {
			held = append(held, d.ID)
			continue
		}
		kept = append(kept, d)
	}
	msg := ""
	if len(held) > 0 {
		msg = fmt.Sprintf("XPU(s) %s withheld while their cards %s are laid out", strings.Join(held, ","), strings.Join(cards, ", "))
	}
	s.note("withheld", msg, log.Infof, "no card is being laid out: every XPU is offered again")
	return kept
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
