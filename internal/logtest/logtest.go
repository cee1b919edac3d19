// Package logtest has a logger.Interface for tests that keeps what it is
// told, safe for concurrent use.
package logtest

import (
	"fmt"
	"strings"
	"sync"

	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Recorder keeps every line logged to it as "LEVEL: message", LEVEL being
// debug, info, warning or error.
type Recorder struct {
	mu    sync.Mutex
	lines []string
}

var _ logger.Interface = (*Recorder)(nil)

func (r *Recorder) add(level, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, level+": "+fmt.Sprintf(format, args...))
}

// Debugf records a debug line.
func (r *Recorder) Debugf(format string, args ...any) { r.add("debug", format, args...) }

// Infof records an info line.
func (r *Recorder) Infof(format string, args ...any) { r.add("info", format, args...) }

// Warnf records a warning line.
func (r *Recorder) Warnf(format string, args ...any) { r.add("warning", format, args...) }

// Errorf records an error line.
func (r *Recorder) Errorf(format string, args ...any) { r.add("error", format, args...) }

// Lines returns a copy of the lines so far.
func (r *Recorder) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// String returns the lines so far, one per line.
func (r *Recorder) String() string { return strings.Join(r.Lines(), "\n") }

// Count returns how many lines contain s.
func (r *Recorder) Count(s string) int {
	n := 0
	for _, l := range r.Lines() {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// Has reports whether a line contains s.
func (r *Recorder) Has(s string) bool { return r.Count(s) > 0 }

// Warnings returns the warning and error lines so far, one per line,
// without their level.
func (r *Recorder) Warnings() string {
	var out []string
	for _, l := range r.Lines() {
		if m, ok := strings.CutPrefix(l, "warning: "); ok {
			out = append(out, m)
		} else if m, ok := strings.CutPrefix(l, "error: "); ok {
			out = append(out, m)
		}
	}
	return strings.Join(out, "\n")
}
