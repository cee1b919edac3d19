package fakehost

import (
	"fmt"
	"sort"
	"strings"
)

// procDevicesChar are the char majors of a typical x86-64 server kernel;
// the xpu line is inserted in major order (replacing a colliding entry).
var procDevicesChar = []struct {
	major uint32
	name  string
}{
	{1, "mem"},
	{4, "/dev/vc/0"},
	{4, "tty"},
	{4, "ttyS"},
	{5, "/dev/tty"},
	{5, "/dev/console"},
	{5, "/dev/ptmx"},
	{5, "ttyprintk"},
	{7, "vcs"},
	{10, "misc"},
	{13, "input"},
	{21, "sg"},
	{29, "fb"},
	{89, "i2c"},
	{128, "ptm"},
	{136, "pts"},
	{180, "usb"},
	{189, "usb_device"},
	{202, "cpu/msr"},
	{203, "cpu/cpuid"},
	{226, "drm"},
	{236, "nvme-generic"},
	{237, "nvme"},
	{238, "hidraw"},
	{239, "ttyDBC"},
	{240, "aux"},
	{241, "bsg"},
	{242, "watchdog"},
	{244, "ipmidev"},
	{245, "ptp"},
	{246, "pps"},
	{247, "rtc"},
	{248, "dma_heap"},
	{249, "dax"},
	{250, "dimmctl"},
	{251, "ndctl"},
	{252, "tpm"},
	{253, "ubi_ctrl"},
	{254, "gpiochip"},
}

const procDevicesBlock = `
Block devices:
  7 loop
  8 sd
  9 md
 65 sd
 66 sd
 67 sd
 68 sd
 69 sd
 70 sd
 71 sd
128 sd
129 sd
130 sd
131 sd
132 sd
133 sd
134 sd
135 sd
253 device-mapper
254 mdp
259 blkext
`

// procDevices renders /proc/devices with "<major> xpu" among the others.
func procDevices(major uint32) string {
	type line struct {
		major uint32
		name  string
	}
	lines := []line{{major, "xpu"}}
	for _, l := range procDevicesChar {
		if l.major != major {
			lines = append(lines, line{l.major, l.name})
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].major < lines[j].major })
	var sb strings.Builder
	sb.WriteString("Character devices:\n")
	for _, l := range lines {
		fmt.Fprintf(&sb, "%3d %s\n", l.major, l.name)
	}
	sb.WriteString(procDevicesBlock)
	return sb.String()
}

// procInfo renders /proc/xpu/devN/info in the family's format.
func procInfo(d Device, driverVersion string) string {
	if d.Family == Kunlun1 {
		return fmt.Sprintf("DeviceName: %s\nDeviceAddr: %s\nDeviceSN: %s\nFirmwareVersion: %s\nCPLDVersion: %6x\nDriverVersion: %s\n",
			d.DeviceName, d.BDF, d.Serial, d.FirmwareVersion, d.CPLDVersion, driverVersion)
	}
	return fmt.Sprintf("DeviceName:\t%s\nDeviceAddr:\t%s\nDeviceSN:\t%s\nDriverVersion:\t%s\n",
		d.DeviceName, d.BDF, d.Serial, driverVersion)
}

// procErrInfo renders errinfo: the family's "no error" text or ErrInfo.
func procErrInfo(d Device) string {
	switch {
	case d.ErrInfo != "":
		return d.ErrInfo + "\n"
	case d.Family == Kunlun1:
		return "no error\n"
	default:
		return "No error\n"
	}
}

// buildProcfs writes /proc/devices and /proc/xpu (driver 5.x:
// /proc/kunlun).
func (b *builder) buildProcfs() error {
	if b.h.NoProcfs {
		return nil
	}
	h := b.h
	if h.XRE5() {
		return b.buildProcKunlun()
	}
	probe := "\n"
	if len(h.ProbeErrors) > 0 {
		var sb strings.Builder
		for _, p := range h.ProbeErrors {
			sb.WriteString(p.line() + "\n")
		}
		probe = sb.String()
	}
	files := []struct{ path, text string }{
		{"/proc/devices", procDevices(h.Major)},
		{"/proc/xpu/version", h.DriverVersion + "\n"},
		{"/proc/xpu/load_time", fmt.Sprintf("jiffies: %d\n", h.LoadJiffies)},
		{"/proc/xpu/probe_error", probe},
	}
	for _, f := range files {
		perm := 0o666 // every xpu proc entry is created 0666
		if f.path == "/proc/devices" {
			perm = 0o444
		}
		if err := b.writeText(f.path, f.text, fsMode(perm)); err != nil {
			return err
		}
	}
	for _, d := range h.Devices {
		if err := b.procDevice(d); err != nil {
			return err
		}
	}
	return nil
}

// procDevice writes the driver's procfs entries of one device:
// /proc/xpu/devN on 4.x, /proc/kunlun/devN (for a device with a node) on
// 5.x.
func (b *builder) procDevice(d Device) error {
	h := b.h
	if h.NoProcfs || d.NoProc {
		return nil
	}
	if h.XRE5() {
		if d.NoNode {
			return nil
		}
		return b.writeText(fmt.Sprintf("/proc/kunlun/dev%d/dma_excp_mask", d.Index), "0x0\n", 0o644)
	}
	dir := fmt.Sprintf("/proc/xpu/dev%d/", d.Index)
	files := []struct{ path, text string }{
		{dir + "info", procInfo(d, h.DriverVersion)},
		{dir + "state", d.State + "\n"},
		{dir + "errinfo", procErrInfo(d)},
		{dir + "reset_count", fmt.Sprintf("%d\n", d.Resets)},
	}
	if d.Family != Kunlun1 {
		files = append(files,
			struct{ path, text string }{dir + "mminfo", fmt.Sprintf("L3: 0 / %d MB\nMAIN: 0 / %d MB\n", d.L3MiB, d.MemoryMiB)},
			struct{ path, text string }{dir + "limits", "MaxInstances:\t12\nInstances:\t0\nMemoryLimit:\t0 MB\n"},
		)
	}
	for _, f := range files {
		// Every xpu proc entry is created 0666.
		if err := b.writeText(f.path, f.text, 0o666); err != nil {
			return err
		}
	}
	return nil
}

// buildProcKunlun writes what a driver 5.x host has: /proc/devices and
// /proc/kunlun/devN/dma_excp_mask, no /proc/xpu.
func (b *builder) buildProcKunlun() error {
	if err := b.writeText("/proc/devices", procDevices(b.h.Major), 0o444); err != nil {
		return err
	}
	for _, d := range b.h.Devices {
		if err := b.procDevice(d); err != nil {
			return err
		}
	}
	return nil
}
