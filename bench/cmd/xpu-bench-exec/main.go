// Command xpu-bench-exec execs its arguments and does nothing else: the
// floor of what any shim written in Go adds to a runtime call (the Go
// runtime's start plus an execve from a multi-threaded process). xpu-bench
// times it, built like the shim (static, -trimpath, -s -w), against the
// program it execs run alone.
package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: xpu-bench-exec PROGRAM [ARG...]")
		os.Exit(2)
	}
	err := syscall.Exec(os.Args[1], os.Args[1:], os.Environ()) //nolint:gosec // G204: running the given program is this command's job.
	fmt.Fprintln(os.Stderr, "xpu-bench-exec:", err)
	os.Exit(1)
}
