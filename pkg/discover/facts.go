package discover

import (
	"path/filepath"
	"strings"
)

// The Kunlun chip generations (Facts.Generation).
const (
	// GenerationKunlun1 is K100 and K200.
	GenerationKunlun1 = "Kunlun1"
	// GenerationKunlun2 is the R series (R100, R200, R300, RG800, ...).
	GenerationKunlun2 = "Kunlun2"
	// GenerationKunlun3 is P800.
	GenerationKunlun3 = "Kunlun3"
)

// vfSuffix ends the model of an SR-IOV VF ("P800 VF", "R200 VF").
const vfSuffix = " VF"

// Facts are what the node's consumers publish about one device (node
// labels, DRA attributes, xpu-cdi info, the exporter), each derived here
// once, from the raw fields of Device and Host, with one precedence. An
// empty string or a zero means the host does not tell: nothing is guessed.
type Facts struct {
	// Model is the model of the PCI function: Device.Model (P800, P800 VF,
	// R200, R200 VF, K200, ModelUnknown).
	Model string
	// Board is the model of the card the function belongs to: Model
	// without " VF"; ModelUnknown when the card is not known (a Kunlun2 VF
	// whose PF's IDs were not readable).
	Board string
	// Generation is GenerationKunlun1, 2 or 3: from the model (the PCI
	// IDs), else from procfs's DeviceName; "" when neither tells.
	Generation string
	// Serial is the device's serial number (procfs DeviceSN).
	Serial string
	// DriverVersion is the version of the loaded kunlun module
	// (Host.DriverVersion: /proc/xpu/version, /sys/module/kunlun/version),
	// else the one the device's procfs info file gives.
	DriverVersion string
	// XREVersion is Host.XREVersion: the version of the XRE user space.
	XREVersion string
	// FirmwareVersion is procfs's FirmwareVersion (Kunlun1 only), as written.
	FirmwareVersion string
	// MemoryMiB is the device memory in MiB (2^20 bytes): procfs mminfo's
	// MAIN line, else the public size of the board (see boardMemoryMiB);
	// 0 when neither tells.
	MemoryMiB int64
}

// FactsOf returns the facts of d, a device of h.
func (h *Host) FactsOf(d *Device) Facts {
	f := Facts{
		Model:           d.Model,
		Board:           boardOf(d.Model),
		Serial:          d.Serial,
		DriverVersion:   h.DriverVersion,
		XREVersion:      h.XREVersion(),
		FirmwareVersion: d.FirmwareVersion,
		MemoryMiB:       d.MemoryMiB,
	}
	f.Generation = generationOf(d.Model, d.ProcDeviceName)
	if f.DriverVersion == "" {
		f.DriverVersion = d.DriverVersion
	}
	if f.MemoryMiB <= 0 {
		f.MemoryMiB = boardMemoryMiB(d)
	}
	return f
}

// XREVersion is the version of the XRE user space: the version in the name
// of the directory the XRE link leads to, as the vendor's installer names
// it (/usr/local/xpu -> /usr/local/xpu-5.0.21.47 gives 5.0.21.47); "" when
// /usr/local/xpu is no link or its target is not named xpu-<version>, a
// version starting with a digit.
func (h *Host) XREVersion() string {
	if h.XRETarget == "" {
		return ""
	}
	v, ok := strings.CutPrefix(filepath.Base(h.XRETarget), "xpu-")
	if !ok || v == "" || v[0] < '0' || v[0] > '9' {
		return ""
	}
	return v
}

// boardOf is the card's model of a function's model.
func boardOf(model string) string {
	board := strings.TrimSuffix(model, vfSuffix)
	if board == GenerationKunlun2 {
		// "Kunlun2 VF": the VF ID says Kunlun2, but not which card.
		return ModelUnknown
	}
	return board
}

// generations maps every board modelFor names (and the "Kunlun2" of a
// Kunlun2 VF of an unknown card) to its generation.
var generations = func() map[string]string {
	g := map[string]string{
		"K100": GenerationKunlun1, "K200": GenerationKunlun1,
		GenerationKunlun2: GenerationKunlun2,
		"P800":            GenerationKunlun3,
	}
	for _, m := range kunlun2Boards {
		g[m] = GenerationKunlun2
	}
	return g
}()

// generationOf names the generation of a model (a VF's is its card's),
// else of procfs's DeviceName: a Kunlun1 board, or the generation itself.
func generationOf(model, procName string) string {
	if g := generations[strings.TrimSuffix(model, vfSuffix)]; g != "" {
		return g
	}
	switch procName = strings.TrimSpace(procName); procName {
	case GenerationKunlun1, GenerationKunlun3:
		return procName
	}
	return generations[procName] // K100, K200, Kunlun2
}

// boardMemoryMiB is the memory of a device where a public source gives it
// for its model: P800 is 96 GiB (HAMi's whole-card share, 98304 MiB), a VF
// its partition's size (partitionModels). Other boards and VF counts are
// 0 until a source says.
func boardMemoryMiB(d *Device) int64 {
	switch d.Model {
	case "P800":
		return 98304
	case "P800" + vfSuffix, "R200" + vfSuffix:
		m, _ := PartitionModelOf(boardOf(d.Model))
		return m.VFMemoryMiB[parentNumVFs(d)]
	}
	return 0
}

func parentNumVFs(d *Device) int {
	if d.PCI == nil {
		return 0
	}
	return d.PCI.ParentNumVFs
}
