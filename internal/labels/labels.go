package labels

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Prefix is the namespace and common part of every label but the
// partition counts (names.LabelPrefix).
const Prefix = names.LabelPrefix

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

// For returns the labels of host h: none when h has no compute XPU. The
// partition counts are named after resource, the device plugin's
// --resource-name ("": names.ResourceName). With s nil the sharing labels
// are left out (the device plugin, which knows how it shares, writes them).
func For(h *discover.Host, resource string, s *sharing.Config) []Label {
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
	facts := make([]discover.Facts, len(compute))
	for i, d := range compute {
		facts[i] = h.FactsOf(d)
	}
	if model := common(facts, func(f discover.Facts) string { return f.Board }); model != discover.ModelUnknown {
		add(Model, model)
	}
	add(Family, common(facts, func(f discover.Facts) string { return f.Generation }))
	add(DriverVersion, common(facts, func(f discover.Facts) string { return f.DriverVersion }))
	add(XREVersion, h.XREVersion())
	// A number or nothing: a node selector compares it with Gt and Lt.
	if mib := common(facts, func(f discover.Facts) string { return memory(f.MemoryMiB) }); mib != mixed {
		add(Memory, mib)
	}
	if resource == "" {
		resource = names.ResourceName
	}
	out = append(out, partitionLabels(h, resource)...)
	if s != nil {
		add(SharingStrategy, s.Strategy())
		add(Replicas, strconv.Itoa(s.Replicas))
	}
	return out
}

// mixed is the value of a label whose devices disagree.
const mixed = "mixed"

// common returns f of every device when they agree, mixed when they do
// not, "" when f is empty for any.
func common(facts []discover.Facts, f func(discover.Facts) string) string {
	v := ""
	for i, d := range facts {
		x := f(d)
		switch {
		case x == "":
			return ""
		case i == 0:
			v = x
		case x != v:
			return mixed
		}
	}
	return v
}

// memory is the memory label's value of mib (MiB): "" when unknown.
func memory(mib int64) string {
	if mib <= 0 {
		return ""
	}
	return strconv.FormatInt(mib, 10)
}

// MaxValueLength is the longest label value Kubernetes accepts.
const MaxValueLength = 63

// Sanitize turns v into a valid label value: characters other than
// letters, digits, '-', '_' and '.' become '-', the value is cut to 63
// characters and what is not a letter or digit is trimmed from both ends.
// It reports false when nothing is left. Kept by hand: apimachinery's
// validation only checks a value, and no library maps any text to one.
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
