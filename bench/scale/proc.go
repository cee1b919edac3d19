package scale

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/prometheus/procfs"
)

// ProcUsage is what /proc tells of one process.
type ProcUsage struct {
	// CPUSeconds is user plus system time so far.
	CPUSeconds float64
	// PeakRSSBytes is VmHWM: the peak resident set since the start or the
	// last ResetPeakRSS.
	PeakRSSBytes int64
}

// ReadProcUsage reads /proc/<pid>/stat and status below procRoot, through
// prometheus/procfs (which counts stat's fields after the command name's
// last ')' and converts USER_HZ ticks to seconds).
func ReadProcUsage(procRoot string, pid int) (ProcUsage, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("reading process %d: %w", pid, err)
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("reading process %d: %w", pid, err)
	}
	stat, err := p.Stat()
	if err != nil {
		return ProcUsage{}, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	status, err := p.NewStatus()
	if err != nil {
		return ProcUsage{}, fmt.Errorf("reading the peak RSS of process %d: %w", pid, err)
	}
	if status.VmHWM == 0 {
		return ProcUsage{}, fmt.Errorf("%s: no VmHWM line (a kernel thread?)", filepath.Join(procRoot, strconv.Itoa(pid), "status"))
	}
	return ProcUsage{CPUSeconds: stat.CPUTime(), PeakRSSBytes: int64(min(status.VmHWM, math.MaxInt64))}, nil
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
