package labels

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Prefix is the namespace and common part of every label.
const Prefix = "baidu.com/xpu."

// The label names (after Prefix).
const (
	Present         = Prefix + "present"
	Count           = Prefix + "count"
	Model           = Prefix + "model"
	Family          = Prefix + "family"
	DriverVersion   = Prefix + "driver-version"
	XREVersion      = Prefix + "xre-version"
	Memory          = Prefix + "memory"
	SharingStrategy = Prefix + "sharing-strategy"
	Replicas        = Prefix + "replicas"
)

// Label is one node label.
type Label struct {
	Key, Value string
}

func (l Label) String() string { return l.Key + "=" + l.Value }

// memoryMiB is the memory of a board, in MiB, where a public source gives
// it: P800 is 96 GiB (HAMi's whole-card share, 98304 MiB). Other boards are
// left out until a source says.
var memoryMiB = map[string]int{
	"P800": 98304,
}

// families names the generation of a board model when procfs does not
// (driver 5.x has no /proc/xpu): the model table of package discover.
var families = map[string]string{
	"K100": "Kunlun1", "K200": "Kunlun1",
	"R100": "Kunlun2", "R200": "Kunlun2", "R200-8F": "Kunlun2", "R200-8FS": "Kunlun2",
	"R300": "Kunlun2", "R420": "Kunlun2", "RG800": "Kunlun2", "RG800-PRO": "Kunlun2",
	"P800": "Kunlun3",
}

// For returns the labels of host h: none when h has no compute XPU. With
// s nil the sharing labels are left out (the device plugin, which knows how
// it shares, writes them).
func For(h *discover.Host, s *sharing.Config) []Label {
	compute := h.ComputeDevices()
	if len(compute) == 0 {
		return nil
	}
	var out []Label
	add := func(key, value string) {
		if v, ok := Sanitize(value); ok {
			out = append(out, Label{key, v})
		}
	}
	add(Present, "true")
	add(Count, strconv.Itoa(len(compute)))
	model := common(compute, func(d *discover.Device) string {
		return strings.TrimSuffix(d.Model, " VF")
	})
	if model != discover.ModelUnknown {
		add(Model, model)
	}
	family := common(compute, func(d *discover.Device) string {
		if f := families[strings.TrimSuffix(d.Model, " VF")]; f != "" {
			return f
		}
		if strings.HasPrefix(d.Family, "Kunlun") {
			return d.Family
		}
		return families[d.Family] // K100, K200 from procfs
	})
	add(Family, family)
	driver := h.DriverVersion
	if driver == "" {
		driver = common(compute, func(d *discover.Device) string { return d.DriverVersion })
	}
	add(DriverVersion, driver)
	add(XREVersion, xreVersion(h))
	if mib, ok := memoryMiB[model]; ok {
		add(Memory, strconv.Itoa(mib))
	}
	if s != nil {
		add(SharingStrategy, s.Strategy())
		add(Replicas, strconv.Itoa(s.Replicas))
	}
	return out
}

// common returns f of every device when they agree, "mixed" when they do
// not, "" when f is empty for any.
func common(devs []*discover.Device, f func(*discover.Device) string) string {
	v := ""
	for i, d := range devs {
		x := f(d)
		switch {
		case x == "":
			return ""
		case i == 0:
			v = x
		case x != v:
			return "mixed"
		}
	}
	return v
}

var xreDir = regexp.MustCompile(`^xpu-([0-9][0-9A-Za-z._-]*)$`)

// xreVersion is the version in the name of the directory the XRE version
// link leads to (/usr/local/xpu -> /usr/local/xpu-5.0.21.47), as the
// vendor's installer names it; "" when there is no such link.
func xreVersion(h *discover.Host) string {
	if h.XRETarget == "" {
		return ""
	}
	m := xreDir.FindStringSubmatch(filepath.Base(h.XRETarget))
	if m == nil {
		return ""
	}
	return m[1]
}

// MaxValueLength is the longest label value Kubernetes accepts.
const MaxValueLength = 63

// Sanitize turns v into a valid label value: characters other than
// letters, digits, '-', '_' and '.' become '-', the value is cut to 63
// characters and what is not a letter or digit is trimmed from both ends.
// It reports false when nothing is left.
func Sanitize(v string) (string, bool) {
	b := []byte(v)
	for i, c := range b {
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '-'
		}
	}
	s := string(b)
	if len(s) > MaxValueLength {
		s = s[:MaxValueLength]
	}
	s = strings.TrimFunc(s, func(r rune) bool { return r > 0x7f || !isAlnum(byte(r)) })
	return s, s != ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Format writes labels one per line, key=value, after a comment saying who
// wrote the file, as NFD's local source reads it.
func Format(labels []Label, writer string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by %s: node labels of the Kunlun XPUs, read by Node Feature Discovery's local source.\n", writer)
	for _, l := range slices.Clone(labels) {
		b.WriteString(l.String() + "\n")
	}
	return []byte(b.String())
}
