// Command xpu-bench-noop does nothing. xpu-bench times it, built like the
// project's binaries (static, -trimpath, -s -w), as the floor of what any Go
// process costs to start on the machine: the hook rows are read against it.
package main

func main() {}
