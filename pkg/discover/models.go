package discover

// PCI IDs of the Kunlun family (see docs/design.md for sources).
const (
	vendorKunlun   uint16 = 0x1d22
	deviceKunlunPF uint16 = 0x3684 // Kunlun1 and Kunlun2 physical functions
	deviceKunlunVF uint16 = 0x3685 // Kunlun2 SR-IOV virtual function
	// P800 (Kunlun3): PaddlePaddle's P800 guide names the device IDs
	// 0x3686-0x3689; third parties report 0x3688. Which one is which
	// board, and whether one is a VF, is not public.
	deviceP800First uint16 = 0x3686
	deviceP800Last  uint16 = 0x3689

	subsystemVendorKunlun2 uint16 = 0x0002
)

// kunlun2Boards maps the Kunlun2 subsystem device ID to the board model.
var kunlun2Boards = map[uint16]string{
	1: "R200",
	2: "R100",
	3: "R300",
	4: "R200-8F",
	5: "R200-8FS",
	6: "R420",
	7: "RG800",
	8: "RG800-PRO",
}

// modelFor names the board from its PCI IDs. procName is the procfs
// DeviceName, which is the only source telling K100 from K200. parentModel is used for
// VFs. It never fails: unknown IDs, and the IDs of another vendor (a
// function the kunlun driver binds is a Kunlun device whatever its IDs),
// give ModelUnknown.
func modelFor(p *PCI, procName, parentModel string) string {
	if p == nil {
		if procName == "K100" || procName == "K200" {
			return procName
		}
		return ModelUnknown
	}
	if p.VendorID != vendorKunlun {
		return ModelUnknown
	}
	switch p.DeviceID {
	case deviceKunlunPF:
		if p.SubsystemVendor == subsystemVendorKunlun2 {
			if m, ok := kunlun2Boards[p.SubsystemDevice]; ok {
				return m
			}
			return ModelUnknown
		}
		if procName == "K100" || procName == "K200" {
			return procName
		}
		return ModelUnknown
	case deviceKunlunVF:
		if parentModel != "" && parentModel != ModelUnknown {
			return parentModel + " VF"
		}
		return "Kunlun2 VF"
	}
	if p.DeviceID >= deviceP800First && p.DeviceID <= deviceP800Last {
		// No P800 VF device ID is public: the physfn link says which
		// function is a VF.
		if p.Function == FunctionVF {
			return "P800 VF"
		}
		return "P800"
	}
	return ModelUnknown
}
