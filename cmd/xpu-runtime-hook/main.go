// Command xpu-runtime-hook is the OCI createContainer hook that the CDI specs
// of xpu-cdi name. It reads the container state from stdin, finds the
// container's root filesystem through the bundle's config.json and works only
// inside that root. It prints nothing on stdout and logs to stderr.
//
// Exit status: 0 on success, and also for an unknown subcommand or flag (a
// newer spec must not break an older hook) and for every change the image's
// layout does not allow (a read-only root, no /etc, a dangling, looping or
// magic link, a directory where a file goes, a path onto another mount: each
// logged as a warning and skipped, see package hook); 1 for anything else (a
// bad container state, an I/O error, a full disk), with a message naming
// what was wrong.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/hook"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
)

// Stamped at build time with -ldflags -X main.version=... -X main.commit=...
var (
	version = "dev"
	commit  = "unknown"
)

const envPrefix = "XPU_HOOK_"

func main() {
	os.Exit(run(os.Args, os.Stdin, os.Stderr))
}

// run is main without the process exit, for tests.
func run(args []string, stdin io.Reader, stderr io.Writer) int {
	log := logrus.New()
	log.SetOutput(stderr)
	log.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})

	app := newApp(log, stdin, stderr)
	if err := app.Run(args); err != nil {
		if benign(err) {
			log.Warnf("%v; the container starts without this change", err)
			return 0
		}
		log.Errorf("%v", err)
		return 1
	}
	return 0
}

// benign reports errors that must not stop the container from starting.
func benign(err error) bool {
	return errors.Is(err, unix.EROFS) || errors.Is(err, hook.ErrNoEtc)
}

func newApp(log *logrus.Logger, stdin io.Reader, stderr io.Writer) *cli.App {
	var level string
	app := &cli.App{
		Name:      "xpu-runtime-hook",
		Usage:     "OCI createContainer hook for Kunlun XPU containers (reads the container state on stdin)",
		Version:   version + " (commit " + commit + ")",
		Writer:    stderr, // nothing ever goes to stdout
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:        "log-level",
				Usage:       "panic, fatal, error, warn, info, debug or trace",
				Value:       "info",
				EnvVars:     []string{envPrefix + "LOG_LEVEL"},
				Destination: &level,
			},
		},
		Before: func(*cli.Context) error {
			l, err := logrus.ParseLevel(level)
			if err != nil {
				return fmt.Errorf("--log-level %q: %w", level, err)
			}
			log.SetLevel(l)
			return nil
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			log.Warnf("ignoring the hook invocation: %v (an older xpu-runtime-hook than the spec expects?)", err)
			return nil
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				_ = cli.ShowAppHelp(c)
				return errors.New("no subcommand given")
			}
			log.Warnf("unknown subcommand %q ignored (an older xpu-runtime-hook than the spec expects?)", c.Args().First())
			return nil
		},
	}
	for _, s := range subcommands {
		app.Commands = append(app.Commands, s.command(log, stdin))
	}
	for _, c := range app.Commands {
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			log.Warnf("ignoring the hook invocation: %v (an older xpu-runtime-hook than the spec expects?)", err)
			return nil
		}
	}
	return app
}

// openContainerRoot reads the state from stdin and opens the root it names.
func openContainerRoot(stdin io.Reader) (*rootfs.Root, error) {
	st, err := hook.ReadState(stdin)
	if err != nil {
		return nil, err
	}
	rootPath, err := hook.RootPath(st)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", st.ID, err)
	}
	return rootfs.Open(rootPath)
}
