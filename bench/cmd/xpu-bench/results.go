package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// machine describes where the numbers were taken.
func machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "unknown kernel"
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = string(bytes.TrimRight(u.Release[:], "\x00"))
	}
	load := ""
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	return fmt.Sprintf("%d CPUs (%s), Linux %s, load average at the end %s", runtime.NumCPU(), cpu, kernel, load)
}

// writeResults writes the markdown results file.
func writeResults(path string, rows []Row, took time.Duration) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# xpu-cdi benchmark results\n\n")
	fmt.Fprintf(&b, "Written by `make bench` (hack/bench.sh, bench/cmd/xpu-bench) on %s in %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s. %s\n\n", machine(), commitLine())
	b.WriteString("The machine is shared and noisy (2 cores shared with other work): every comparison is interleaved in one run " +
		"(A B B A ...) and reported as medians, median paired differences and ratios; absolute times are only indicative. " +
		"docs/benchmarks.md says what each row measures.\n\n")
	if err := writeMarkdown(&b, rows); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}

func commitLine() string {
	if c := os.Getenv("XPU_BENCH_COMMIT"); c != "" {
		return "Commit " + c + "."
	}
	return ""
}
