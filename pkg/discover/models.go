package discover

// PCI IDs of the Kunlun family (see docs/design.md for sources).
const (
	vendorKunlun   uint16 = 0x1d22
	deviceKunlunPF uint16 = 0x3684 // Kunlun1 and Kunlun2 physical functions
	deviceKunlunVF uint16 = 0x3685 // Kunlun2 SR-IOV virtual function
	deviceP800     uint16 = 0x3688 // reported by third parties for P800 (Kunlun3)

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

// modelFor names the board from its PCI IDs. family is the procfs DeviceName,
// which is the only source telling K100 from K200. parentModel is used for
// VFs. It never fails: unknown IDs give ModelUnknown.
func modelFor(p *PCI, family, parentModel string) string {
	if p == nil {
		if family == "K100" || family == "K200" {
			return family
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
		if family == "K100" || family == "K200" {
			return family
		}
		return ModelUnknown
	case deviceKunlunVF:
		if parentModel != "" && parentModel != ModelUnknown {
			return parentModel + " VF"
		}
		return "Kunlun2 VF"
	case deviceP800:
		return "P800"
	}
	return ModelUnknown
}
