package scale

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture this project builds for (the kernel converts
// from its own HZ for this ABI).
const userHZ = 100

// ProcUsage is what /proc tells of one process.
type ProcUsage struct {
	// CPUSeconds is user plus system time so far.
	CPUSeconds float64
	// PeakRSSBytes is VmHWM: the peak resident set since the start or the
	// last ResetPeakRSS.
	PeakRSSBytes int64
}

// ReadProcUsage reads /proc/<pid>/stat and status below procRoot.
func ReadProcUsage(procRoot string, pid int) (ProcUsage, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return ProcUsage{}, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	cpu, err := parseStatCPU(stat)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("%s: %w", filepath.Join(dir, "stat"), err)
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return ProcUsage{}, fmt.Errorf("reading the peak RSS of process %d: %w", pid, err)
	}
	hwm, err := parseStatusHWM(status)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("%s: %w", filepath.Join(dir, "status"), err)
	}
	return ProcUsage{CPUSeconds: cpu, PeakRSSBytes: hwm}, nil
}

// ResetPeakRSS sets the process's VmHWM back to its current RSS (writing 5
// to /proc/PID/clear_refs, Linux 4.0 and later; root or the process's
// owner), so that the next ReadProcUsage gives the peak of a phase.
func ResetPeakRSS(procRoot string, pid int) error {
	path := filepath.Join(procRoot, strconv.Itoa(pid), "clear_refs")
	if err := os.WriteFile(path, []byte("5"), 0); err != nil {
		return fmt.Errorf("resetting the peak RSS of process %d: %w", pid, err)
	}
	return nil
}

// parseStatCPU returns utime+stime (fields 14 and 15) of a stat line in
// seconds. The command name (field 2) may hold spaces and parentheses, so
// the fields are counted after its last ')'.
func parseStatCPU(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", firstBytes(stat))
	}
	// After ")": field 3 (state) is fields[0], utime (14) fields[11], stime (15) fields[12].
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(fields))
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CPU time %q: %w", f, err)
		}
		ticks += n
	}
	return float64(ticks) / userHZ, nil
}

// parseStatusHWM returns VmHWM of a status file in bytes.
func parseStatusHWM(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmHWM line %q: want a number of kB", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmHWM %q: %w", f[0], err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no VmHWM line")
}

func firstBytes(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
