// Command xpu-container-runtime is a runc shim that gives Kunlun XPUs to
// containers of engines that do not read CDI specs (Docker 20.10,
// containerd 1.6). It is called exactly like runc. For `create` and `run`
// it adds the XPUs the container was granted (cdi.k8s.io annotations, the
// device plugin's mounts, XPU_VISIBLE_DEVICES of privileged containers) to
// the bundle's config.json; then, and for every
// other subcommand, it execs the low-level runtime (runc, crun) with the
// same arguments and environment.
//
// It never writes to stdout, and writes to stderr only when it fails (the
// engines merge runc's stderr into the output they parse). Errors also go
// to the --log file the engine passes, in its --log-format, where
// containerd and Docker read the reason a create failed. Its own log is the
// log-file of its configuration (docs/shim.md).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xpu-cdi/xpu-cdi/internal/config"
	"github.com/xpu-cdi/xpu-cdi/internal/shim"
)

// Stamped at build time with -ldflags -X.
var (
	version = "dev"
	commit  = "unknown"
)

const program = "xpu-container-runtime"

func main() {
	args := os.Args[1:]
	a := shim.ParseArgs(args)
	cfg, cfgPath, cfgErr := config.Load(os.Getenv)
	log, closeLog := newLogger(cfg)

	runtime, err := shim.FindRuntime(cfg.LowLevelRuntimes, os.Getenv("PATH"), "/proc/self/exe")
	if err != nil {
		fail(a, log, err)
	}
	if cfgErr != nil {
		log.Warnf("%v; using the default configuration for what does not ask for XPUs", cfgErr)
	}
	if a.ModifiesBundle() {
		bundle := a.Bundle
		if bundle == "" {
			bundle = "."
		}
		if _, err := shim.ModifyBundle(bundle, cfg, shim.Settings{Log: log, ConfigPath: cfgPath, ConfigErr: cfgErr}); err != nil {
			fail(a, log, err)
		}
	}
	log.Debugf("%s %s (%s): exec %s %s", program, version, commit, runtime, strings.Join(args, " "))
	closeLog()
	err = syscall.Exec(runtime, append([]string{runtime}, args...), os.Environ()) //nolint:gosec // G702: running the configured low-level runtime with the caller's argv is the shim's job.
	fail(a, log, fmt.Errorf("executing the low-level runtime %s: %w", runtime, err))
}

// newLogger logs to the configured log file, or nowhere.
func newLogger(cfg *config.Config) (*logrus.Logger, func()) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	if cfg.LogFile == "" {
		return log, func() {}
	}
	f, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return log, func() {}
	}
	level, err := logrus.ParseLevel(cfg.LogLevel)
	if err != nil {
		level = logrus.InfoLevel
	}
	log.SetLevel(level)
	log.SetOutput(f)
	log.SetFormatter(boundedFormatter{&logrus.TextFormatter{DisableColors: true, FullTimestamp: true}})
	log.AddHook(pidHook{})
	return log, func() { _ = f.Close() }
}

// maxLogMessage bounds one message of the shim's log, its stderr and the
// engine's --log file. A refused variable or annotation is quoted in the
// message, and the container author chooses its size (megabytes).
const maxLogMessage = 4096

// boundMessage cuts msg to maxLogMessage bytes and says so.
func boundMessage(msg string) string {
	if len(msg) <= maxLogMessage {
		return msg
	}
	return fmt.Sprintf("%s... [truncated: %d more bytes]", msg[:maxLogMessage], len(msg)-maxLogMessage)
}

// boundedFormatter formats entries with their message bounded.
type boundedFormatter struct{ logrus.Formatter }

func (f boundedFormatter) Format(e *logrus.Entry) ([]byte, error) {
	if len(e.Message) > maxLogMessage {
		c := *e
		c.Message = boundMessage(e.Message)
		e = &c
	}
	return f.Formatter.Format(e)
}

// pidHook tags every entry with the process ID: many shims run at once.
type pidHook struct{}

func (pidHook) Levels() []logrus.Level { return logrus.AllLevels }
func (pidHook) Fire(e *logrus.Entry) error {
	e.Data["pid"] = os.Getpid()
	return nil
}

// fail reports err on stderr, in the engine's --log file and in the shim's
// own log, and exits 1.
func fail(a shim.Args, log *logrus.Logger, err error) {
	msg := boundMessage(program + ": " + err.Error())
	log.Error(err)
	fmt.Fprintln(os.Stderr, msg)
	if a.Log != "" {
		writeRuntimeLog(a.Log, a.LogFormat, msg)
	}
	os.Exit(1)
}

// writeRuntimeLog appends an error entry to runc's --log file in runc's
// format (logrus JSON or text), where containerd's shim looks for the last
// error of a failed create.
func writeRuntimeLog(path, format, msg string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	now := time.Now().Format(time.RFC3339Nano)
	if format == "json" {
		line, _ := json.Marshal(map[string]string{"level": "error", "msg": msg, "time": now})
		_, _ = f.Write(append(line, '\n'))
		return
	}
	fmt.Fprintf(f, "time=%q level=error msg=%q\n", now, msg)
}
