package fakehost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// XPUSMIStatePath is the state file the fake xpu-smi prints its telemetry
// (-m, -q, -i N -q) from, inside the fake host. Tests change it with
// WriteXPUSMIState.
const XPUSMIStatePath = "/etc/xpu-fakehost/xpu-smi.state"

// XPUSMIMode says how the fake xpu-smi behaves when asked for telemetry.
type XPUSMIMode string

// The fake xpu-smi's modes.
const (
	// SMINormal prints the devices of the state file.
	SMINormal XPUSMIMode = "normal"
	// SMIHang never exits and prints nothing.
	SMIHang XPUSMIMode = "hang"
	// SMIFlood prints -m lines without end.
	SMIFlood XPUSMIMode = "flood"
	// SMIFail prints an error and exits 3, as xpu-smi does without its driver.
	SMIFail XPUSMIMode = "fail"
	// SMIOddLine is SMINormal with a 33rd field on the first -m line.
	SMIOddLine XPUSMIMode = "oddline"
	// SMINoQ is SMINormal but -q fails (exit 5).
	SMINoQ XPUSMIMode = "noq"
)

// Telemetry is what the fake xpu-smi reports for one device, in the units
// xpu-smi prints.
type Telemetry struct {
	// BusID is the device's PCI address (as xpu-smi -q prints it).
	BusID       string
	Temperature float64 // C
	Power       float64 // W
	UsedMiB     int64
	TotalMiB    int64
	Utilization int64 // percent
	// Name is the product name of two words ("P800 OAM"), as -m prints it
	// in parentheses.
	Name string
	// Serial is the serial number -q prints (Serial Number); empty: the
	// line is left out.
	Serial string
}

// XPUSMIState is the whole state file: the mode and the devices in xpu-smi
// index order (which need not be the order of /dev/xpuN).
type XPUSMIState struct {
	Mode    XPUSMIMode
	Devices []Telemetry
}

// DefaultTelemetry is the state Build writes: every compute device of t in
// index order, idle, with its memory (mminfo's, or 98304 MiB on P800).
func DefaultTelemetry(t *Tree) XPUSMIState {
	s := XPUSMIState{Mode: SMINormal}
	mem := map[int]int{}
	for _, d := range t.Host.Devices {
		mem[d.Index] = d.MemoryMiB
	}
	for _, d := range t.ComputeDevices() {
		total := int64(mem[d.Index])
		if total == 0 {
			total = 98304
		}
		name := d.Model + " XPU"
		if d.Function == FunctionVF {
			name = strings.TrimSuffix(d.Model, " VF") + " VF"
		}
		if strings.HasPrefix(d.Model, "P800") && d.Function != FunctionVF {
			name = "P800 OAM"
		}
		s.Devices = append(s.Devices, Telemetry{BusID: d.BDF, Temperature: 35, Power: 60, TotalMiB: total, Name: name})
	}
	return s
}

// WriteXPUSMIState writes s to the state file of the fake host at root,
// atomically (the exporter may be running the fake xpu-smi meanwhile).
func WriteXPUSMIState(root string, s XPUSMIState) error {
	var b strings.Builder
	b.WriteString("# state of the fake xpu-smi (internal/fakehost/xpusmi.go): mode, then one dev line per device in xpu-smi index order\n")
	mode := s.Mode
	if mode == "" {
		mode = SMINormal
	}
	fmt.Fprintf(&b, "mode %s\n", mode)
	for _, d := range s.Devices {
		words := strings.Fields(d.Name)
		if len(words) != 2 || d.BusID == "" || strings.ContainsAny(d.BusID, " \t\n") || strings.ContainsAny(d.Serial, " \t\n") || len(d.Serial) > 63 {
			return fmt.Errorf("fake xpu-smi state: device %q %q %q: the bus ID must be one word, the name two words and the serial at most one word of 63 bytes", d.BusID, d.Name, d.Serial)
		}
		fmt.Fprintf(&b, "dev %s %g %g %d %d %d %s %s", d.BusID, d.Temperature, d.Power, d.UsedMiB, d.TotalMiB, d.Utilization, words[0], words[1])
		if d.Serial != "" {
			b.WriteString(" " + d.Serial)
		}
		b.WriteString("\n")
	}
	path := filepath.Join(root, filepath.FromSlash(XPUSMIStatePath))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the fake xpu-smi state directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing the fake xpu-smi state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("writing the fake xpu-smi state: %w", err), os.Remove(tmp))
	}
	return nil
}
