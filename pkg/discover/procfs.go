package discover

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// procSource adds the driver's /proc/xpu facts to the devices.
type procSource struct {
	devRoot string
	root    hostRoot // devRoot, every directory resolved inside it
	seen    *pciSeen // records a host without /proc/xpu
}

var _ source = (*procSource)(nil)

// newProcSource returns the Source reading /proc/xpu below devRoot.
func newProcSource(root hostRoot, seen *pciSeen) source {
	return &procSource{devRoot: root.HostPath("/"), root: root, seen: seen}
}

// procInfo is the content of /proc/xpu/devN/info. Kunlun2 writes
// "Key:\tValue", Kunlun1 "Key: Value"; unknown keys are ignored.
type procInfo struct {
	DeviceName      string
	DeviceAddr      string
	DeviceSN        string
	DriverVersion   string
	FirmwareVersion string
	CPLDVersion     string
}

// parseProcInfo parses the info file of one device. It fails only when no
// line carries a known key.
func parseProcInfo(data []byte) (procInfo, error) {
	var info procInfo
	known := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		var field *string
		switch strings.TrimSpace(key) {
		case "DeviceName":
			field = &info.DeviceName
		case "DeviceAddr":
			field = &info.DeviceAddr
		case "DeviceSN":
			field = &info.DeviceSN
		case "DriverVersion":
			field = &info.DriverVersion
		case "FirmwareVersion":
			field = &info.FirmwareVersion
		case "CPLDVersion":
			field = &info.CPLDVersion
		default:
			continue
		}
		*field = CleanText(value)
		known++
	}
	if err := sc.Err(); err != nil {
		return procInfo{}, err
	}
	if known == 0 {
		return procInfo{}, errors.New("no known key (DeviceName, DeviceAddr, DeviceSN, DriverVersion)")
	}
	return info, nil
}

func (s *procSource) Discover(h *Host) error {
	procDir := filepath.Join(s.devRoot, "proc", "xpu")
	version, err := s.readTrimmed("/proc/xpu/version")
	switch {
	case err == nil:
		h.DriverVersion = version
	case errors.Is(err, fs.ErrNotExist):
		// Driver 5.x (P800) has no /proc/xpu: optional, one note for the
		// host, none per device.
		s.seen.noProcXPU = true
		why, loaded := s.driverLoaded()
		if !loaded {
			h.warnf("the kunlun driver does not seem to be loaded: there is no %s, %s, %s, nor a kunlun or xpu line in %s; devices get no procfs facts",
				procDir, filepath.Join(s.devRoot, "sys", "module", "kunlun"), filepath.Join(s.devRoot, "proc", "kunlun"), filepath.Join(s.devRoot, "proc", "devices"))
			return nil
		}
		if v, err := s.readTrimmed("/sys/module/kunlun/version"); err == nil {
			h.DriverVersion = v
		}
		h.notef("%s not present (optional: driver 5.x does not create it; the kunlun driver is loaded, %s): devices get no family, serial or state from procfs", procDir, why)
		return nil
	default:
		h.warnf("reading driver version: %v", err)
	}
	for _, d := range h.Devices {
		s.device(d)
	}
	return nil
}

// driverLoaded reports whether the kunlun driver is loaded, and how that
// is known, from what every driver generation has: the module's sysfs
// directory, /proc/kunlun (driver 5.x), a kunlun or xpu line in
// /proc/devices.
func (s *procSource) driverLoaded() (string, bool) {
	for _, dir := range []string{"/sys/module/kunlun", "/proc/kunlun"} {
		if st, err := s.root.stat(dir); err == nil && st.IsDir() {
			return s.root.HostPath(dir) + " exists", true
		}
	}
	devices := s.root.HostPath("/proc/devices")
	data, err := s.root.readSmall("/proc/devices")
	if err != nil {
		return "", false
	}
	if line, ok := driverDevicesLine(data); ok {
		return fmt.Sprintf("%s has %q", devices, line), true
	}
	return "", false
}

// driverDevicesLine returns the first "<major> kunlun" or "<major> xpu"
// line of /proc/devices content, trimmed.
func driverDevicesLine(data []byte) (string, bool) {
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 2 || (f[1] != "kunlun" && f[1] != "xpu") {
			continue
		}
		if _, err := strconv.ParseUint(f[0], 10, 32); err == nil {
			return strings.TrimSpace(line), true
		}
	}
	return "", false
}

func (s *procSource) device(d *Device) {
	inRoot := "/proc/xpu/dev" + strconv.Itoa(d.Index)
	dirPath := s.root.HostPath(inRoot)
	dir, err := s.root.openAttrDir(inRoot)
	if err != nil {
		d.problemf("procfs: %v", trimPathError(err, dirPath))
		return
	}
	defer dir.close()
	data, err := dir.read("info")
	if err != nil {
		d.problemf("procfs: %v", trimPathError(err, filepath.Join(dirPath, "info")))
	} else if info, err := parseProcInfo(data); err != nil {
		d.problemf("procfs: parsing %s/info: %v", dirPath, err)
	} else {
		d.ProcDeviceName = info.DeviceName
		d.ProcAddress = info.DeviceAddr
		d.Serial = info.DeviceSN
		d.DriverVersion = info.DriverVersion
		d.FirmwareVersion = info.FirmwareVersion
	}
	state, err := dir.read("state")
	if err != nil {
		d.problemf("procfs: %v", trimPathError(err, filepath.Join(dirPath, "state")))
		return
	}
	// The state is the first line: "ERROR\n..." is ERROR. A file whose
	// first line is empty keeps its text (escaped): a value no table
	// knows, not "no state".
	line := firstLine(state)
	if line == "" {
		line = strings.TrimRight(string(state), " \t\r\n")
	}
	d.State = CleanText(line)
	// mminfo is optional (Kunlun1 has none): its absence is not a problem.
	if data, err := dir.read("mminfo"); err == nil {
		d.MemoryMiB = parseMainMemory(data)
	}
}

// parseMainMemory returns the total of the MAIN line of an mminfo file
// ("MAIN: 0 / 16384 MB", MiB), 0 when there is none or it does not parse.
func parseMainMemory(data []byte) int64 {
	for line := range strings.Lines(string(data)) {
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "MAIN" {
			continue
		}
		_, total, ok := strings.Cut(value, "/")
		f := strings.Fields(total)
		if !ok || len(f) != 2 || f[1] != "MB" {
			return 0
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return 0
}

// readTrimmed reads a one-value kernel text file at an in-root path: its
// first line, through CleanText.
func (s *procSource) readTrimmed(p string) (string, error) {
	data, err := s.root.readSmall(p)
	if err != nil {
		return "", err
	}
	return CleanText(firstLine(data)), nil
}

// trimPathError turns "open /x: no such file or directory" into
// "/x: not found" for the common case and keeps other errors whole.
func trimPathError(err error, path string) string {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s: not found", path)
	}
	return err.Error()
}
