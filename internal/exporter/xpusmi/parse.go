package xpusmi

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// MFields is the number of fields of an `xpu-smi -m` line.
const MFields = 32

// Field positions of an `xpu-smi -m` line (0-based) that public parsers rely
// on (kunlun-host.md, "Telemetry a host offers").
const (
	fieldIndex       = 1
	fieldTemperature = 4
	fieldPower       = 8
	fieldMemUsed     = 17
	fieldMemTotal    = 18
	fieldUtilization = 19
	fieldNameFirst   = 21
	fieldNameLast    = 22
)

// Sample is the telemetry of one device, in base units.
type Sample struct {
	// Index is the xpu-smi index (not the N of /dev/xpuN).
	Index       int
	Temperature float64 // degrees Celsius
	Power       float64 // watts
	MemoryUsed  float64 // bytes
	MemoryTotal float64 // bytes
	Utilization float64 // 0 to 1
	// Name is the product name xpu-smi prints in parentheses.
	Name string
}

// LineError is a line of xpu-smi output that does not have the expected
// shape.
type LineError struct {
	Line   int // 1-based
	Reason string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// maxLineReported bounds how much of a bad line an error quotes.
const maxLineReported = 80

func quote(line string) string {
	if len(line) > maxLineReported {
		line = line[:maxLineReported] + "..."
	}
	return strconv.Quote(line)
}

// ParseM parses `xpu-smi -m` output: the samples of the lines in the public
// layout and one LineError per line that is not (empty lines are skipped).
// A second line of one index is an error.
func ParseM(out []byte) ([]Sample, []error) {
	var samples []Sample
	var errs []error
	seen := map[int]bool{}
	for n, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		s, err := parseMLine(line)
		if err != nil {
			errs = append(errs, &LineError{Line: n + 1, Reason: err.Error()})
			continue
		}
		if seen[s.Index] {
			errs = append(errs, &LineError{Line: n + 1, Reason: fmt.Sprintf("xpu-smi index %d given twice", s.Index)})
			continue
		}
		seen[s.Index] = true
		samples = append(samples, s)
	}
	return samples, errs
}

// bound is one numeric field of a -m line. Its value in base units is the
// field times mul, divided by div: a power of two multiplies exactly, and a
// division is rounded once to the nearest float, so 57 % is 0.57 where
// 57 * 0.01 would be 0.5700000000000001 (float noise in the exposition).
type bound struct {
	pos      int
	what     string
	mul, div float64
	min, max float64
}

// The numeric fields and the ranges a device's values can have.
var numeric = []bound{
	{fieldTemperature, "temperature", 1, 1, -273.15, 1000},
	{fieldPower, "power", 1, 1, 0, 1e5},
	{fieldMemUsed, "memory used", 1 << 20, 1, 0, 1 << 40},
	{fieldMemTotal, "memory total", 1 << 20, 1, 0, 1 << 40},
	{fieldUtilization, "utilisation", 1, 100, 0, 100},
}

func parseMLine(line string) (Sample, error) {
	f := strings.Fields(line)
	if len(f) != MFields {
		return Sample{}, fmt.Errorf("%d fields, not %d: %s", len(f), MFields, quote(line))
	}
	idx, err := strconv.Atoi(f[fieldIndex])
	if err != nil || idx < 0 {
		return Sample{}, fmt.Errorf("field %d (xpu-smi index) %q is not an index: %s", fieldIndex, f[fieldIndex], quote(line))
	}
	s := Sample{Index: idx}
	dst := []*float64{&s.Temperature, &s.Power, &s.MemoryUsed, &s.MemoryTotal, &s.Utilization}
	for i, b := range numeric {
		x, err := strconv.ParseFloat(f[b.pos], 64)
		if err != nil || math.IsNaN(x) || x < b.min || x > b.max {
			return Sample{}, fmt.Errorf("field %d (%s) %q is not a number from %g to %g: %s", b.pos, b.what, f[b.pos], b.min, b.max, quote(line))
		}
		*dst[i] = x * b.mul / b.div
	}
	if s.MemoryUsed > s.MemoryTotal {
		return Sample{}, fmt.Errorf("memory used %s MiB is more than the total %s MiB: %s", f[fieldMemUsed], f[fieldMemTotal], quote(line))
	}
	first, last := f[fieldNameFirst], f[fieldNameLast]
	if len(first) < 2 || len(last) < 2 || first[0] != '(' || last[len(last)-1] != ')' {
		return Sample{}, fmt.Errorf("fields %d-%d %q %q are not a name in parentheses: %s", fieldNameFirst, fieldNameLast, first, last, quote(line))
	}
	s.Name = first[1:] + " " + last[:len(last)-1]
	return s, nil
}

// Detail is what `xpu-smi -i N -q` tells the exporter about one device.
type Detail struct {
	// BusID is the device's PCI address in the kernel's form
	// (0000:03:00.0), whatever form xpu-smi prints it in.
	BusID string
	// Serial is the device's Serial Number, DriverVersion the Driver
	// Version xpu-smi reports; empty when it prints none (or N/A).
	Serial, DriverVersion string
}

// ErrNoBusID is the error of -q output without a Bus Id line.
var ErrNoBusID = errors.New("no Bus Id line")

// maxFact bounds a Serial Number or Driver Version value; a longer one, or
// one that is not printable ASCII, is left out (it would become a label).
const maxFact = 64

// fact returns value when it is a plausible serial or version.
func fact(value string) string {
	if value == "" || len(value) > maxFact || strings.EqualFold(value, "N/A") {
		return ""
	}
	for _, c := range []byte(value) {
		if c <= ' ' || c > '~' {
			return ""
		}
	}
	return value
}

// ParseQ parses the output of `xpu-smi -i N -q` (labelled text, "Key : Value"
// lines). Exactly one Bus Id line must be there and be a PCI address; the
// Serial Number and Driver Version are taken when they are plausible
// (printable, at most 64 bytes, not N/A), the first of each.
func ParseQ(out []byte) (Detail, error) {
	var d Detail
	for n, line := range strings.Split(string(out), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(key) {
		case "Serial Number":
			if d.Serial == "" {
				d.Serial = fact(value)
			}
		case "Driver Version":
			if d.DriverVersion == "" {
				d.DriverVersion = fact(value)
			}
		case "Bus Id":
			if d.BusID != "" {
				return Detail{}, &LineError{Line: n + 1, Reason: "a second Bus Id line: the output is of more than one device"}
			}
			addr, ok := NormalizeBusID(value)
			if !ok {
				return Detail{}, &LineError{Line: n + 1, Reason: fmt.Sprintf("Bus Id %s is not a PCI address", quote(value))}
			}
			d.BusID = addr
		}
	}
	if d.BusID == "" {
		return Detail{}, ErrNoBusID
	}
	return d, nil
}

// NormalizeBusID turns a PCI address as management tools print it (upper
// case; a domain of 8 digits, as nvidia-smi-like tools print it; or no
// domain) into the kernel's dddd:bb:dd.f form.
func NormalizeBusID(s string) (string, bool) {
	s = strings.ToLower(s)
	switch strings.Count(s, ":") {
	case 1:
		s = "0000:" + s
	case 2:
		if dom, rest, _ := strings.Cut(s, ":"); len(dom) == 8 && strings.HasPrefix(dom, "0000") {
			s = dom[4:] + ":" + rest
		}
	}
	return s, discover.IsPCIAddress(s)
}
