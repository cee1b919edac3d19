package cmdflags

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/elfso"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Host is the group of flags that say where the host is read: --dev-root,
// --driver-root, --driver-arch and, for the commands whose output names
// host paths, --host-root.
type Host struct {
	DevRoot    string
	DriverRoot string
	// DriverArch is the machine of the driver root's libraries; empty:
	// the one xpu-cdi is built for.
	DriverArch string
	// HostRoot is where the host's / is mounted (--host-root); "" when the
	// host is read where it is.
	HostRoot string
}

// HostRootFlag returns --host-root bound to o, for the commands whose
// output names host paths (generate, refresh, install).
func (o *Host) HostRootFlag() cli.Flag {
	return &cli.StringFlag{
		Name:        "host-root",
		Usage:       "the host's / is mounted at `DIR` (e.g. /host in a container): /dev, /proc, /sys and the driver files are read below it and every host path is written as the host sees it; not with --dev-root or --driver-root",
		EnvVars:     []string{"XPU_CDI_HOST_ROOT"},
		Destination: &o.HostRoot,
	}
}

// ApplyHostRoot makes --host-root the dev and driver root. Giving
// --dev-root or --driver-root as well is an error: which paths the spec
// would name is then ambiguous.
func (o *Host) ApplyHostRoot(c *cli.Context) error {
	if o.HostRoot == "" {
		return nil
	}
	for _, f := range []string{"dev-root", "driver-root"} {
		if c.IsSet(f) {
			return fmt.Errorf("--host-root %s and --%s both say where the host is: give --host-root alone", o.HostRoot, f)
		}
	}
	abs, err := filepath.Abs(o.HostRoot)
	if err != nil {
		return fmt.Errorf("--host-root %s: %w", o.HostRoot, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return fmt.Errorf("--host-root %s: %w", o.HostRoot, err)
	}
	o.HostRoot, o.DevRoot, o.DriverRoot = abs, abs, abs
	return nil
}

// Flags returns the --dev-root and --driver-root flags bound to o.
func (o *Host) Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "dev-root",
			Usage:       "root under which /dev, /proc and /sys are read",
			Value:       "/",
			EnvVars:     []string{"XPU_CDI_DEV_ROOT", "XPU_DEV_ROOT"},
			Destination: &o.DevRoot,
		},
		&cli.StringFlag{
			Name:        "driver-root",
			Usage:       "root under which the driver's user-space files (XRE libraries, xpu-smi, ld.so.cache) are read",
			Value:       "/",
			EnvVars:     []string{"XPU_CDI_DRIVER_ROOT", "XPU_DRIVER_ROOT"},
			Destination: &o.DriverRoot,
		},
		&cli.StringFlag{
			Name: "driver-arch",
			Usage: "machine (amd64, arm64) the driver root's libraries must be built for: libraries of another machine are left out " +
				"with a warning. Default: the machine this xpu-cdi is built for, where the containers run; set it for a driver root of another machine",
			EnvVars:     []string{"XPU_CDI_DRIVER_ARCH"},
			Destination: &o.DriverArch,
		},
	}
}

// Discover reads the host. A host without any XPU gives an error that says
// where it looked and what to check.
func (o *Host) Discover(log logger.Interface) (*discover.Host, error) {
	opts := []discover.Option{
		discover.WithDevRoot(o.DevRoot),
		discover.WithDriverRoot(o.DriverRoot),
		discover.WithLogger(log),
	}
	if o.DriverArch != "" {
		if _, err := elfso.ArchByGOARCH(o.DriverArch); err != nil {
			return nil, fmt.Errorf("--driver-arch (XPU_CDI_DRIVER_ARCH): %w", err)
		}
		opts = append(opts, discover.WithArch(o.DriverArch))
	}
	h, err := discover.Discover(opts...)
	if errors.Is(err, discover.ErrNoDevices) {
		return nil, &HintError{Err: err, Hint: "is the kunlun kernel module loaded (lsmod | grep kunlun)? " +
			"When the host's /dev is mounted elsewhere, pass --dev-root. To try xpu-cdi without an XPU, run `make demo`"}
	}
	return h, err
}

// HintError is an error with advice for the user: main prints the error,
// then the hint on a line of its own; code that handles the error (refresh,
// say) sees only Err.
type HintError struct {
	Err  error
	Hint string
}

func (e *HintError) Error() string { return e.Err.Error() }

func (e *HintError) Unwrap() error { return e.Err }

// StatusError is an error for which main exits with Status instead of 1:
// `partition assert` tells a node that does not match (1) from a check that
// could not be made (2). It is not a cli.ExitCoder, which urfave/cli would
// print and exit on by itself, without main's hint.
type StatusError struct {
	Err    error
	Status int
}

func (e *StatusError) Error() string { return e.Err.Error() }

func (e *StatusError) Unwrap() error { return e.Err }

// ExitStatus is the status main exits with for err: a StatusError's, else 1.
func ExitStatus(err error) int {
	if s := (*StatusError)(nil); errors.As(err, &s) && s.Status > 0 {
		return s.Status
	}
	return 1
}
