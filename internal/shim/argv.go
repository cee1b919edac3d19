package shim

import (
	"strings"
)

// Args is what the shim needs from a runc command line.
type Args struct {
	// Command is the subcommand (create, run, start, ...); empty when the
	// command line has none (runc --version).
	Command string
	// Bundle is the --bundle value, "" when not given (the current directory).
	Bundle string
	// Log and LogFormat are the global --log and --log-format values: where
	// the engine reads runc's error messages.
	Log       string
	LogFormat string
}

// ModifiesBundle reports whether the subcommand creates a container from a
// bundle: only these may have their config.json changed.
func (a Args) ModifiesBundle() bool { return a.Command == "create" || a.Command == "run" }

// Global flags of runc (and crun) that take a value; every other global flag
// is boolean. A flag given as --name=value needs no entry.
var globalValueFlags = map[string]bool{
	"root": true, "log": true, "log-format": true, "criu": true, "rootless": true,
	"cgroup-manager": true,
}

// Flags of create and run that take a value.
var createValueFlags = map[string]bool{
	"bundle": true, "b": true, "console-socket": true, "pid-file": true, "preserve-fds": true,
}

// flagName splits "-x", "--name" or "--name=value" (Go's flag package, which
// runc's CLI uses, accepts one or two dashes). ok is false for a non-flag.
func flagName(arg string) (name, value string, hasValue, ok bool) {
	if len(arg) < 2 || arg[0] != '-' {
		return "", "", false, false
	}
	s := arg[1:]
	if s[0] == '-' {
		s = s[1:]
	}
	if s == "" || s[0] == '-' || s[0] == '=' {
		return "", "", false, false
	}
	name, value, hasValue = strings.Cut(s, "=")
	return name, value, hasValue, true
}

// ParseArgs reads runc's command line, args being os.Args[1:]: global flags,
// the subcommand, then its flags and arguments. It never fails: whatever it
// does not understand is left to the low-level runtime.
func ParseArgs(args []string) Args {
	var a Args
	i := 0
	for ; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			i++
			break
		}
		name, value, hasValue, ok := flagName(arg)
		if !ok {
			break
		}
		if !hasValue && globalValueFlags[name] && i+1 < len(args) {
			i++
			value = args[i]
		}
		switch name {
		case "log":
			a.Log = value
		case "log-format":
			a.LogFormat = value
		}
	}
	if i >= len(args) {
		return a
	}
	a.Command = args[i]
	if !a.ModifiesBundle() {
		return a
	}
	for i++; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break
		}
		name, value, hasValue, ok := flagName(arg)
		if !ok {
			continue // the container ID; runc also takes flags after it
		}
		if !hasValue && createValueFlags[name] && i+1 < len(args) {
			i++
			value = args[i]
		}
		if name == "bundle" || name == "b" {
			a.Bundle = value
		}
	}
	return a
}
