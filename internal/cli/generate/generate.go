package generate

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/cmdflags"
	"github.com/xpu-cdi/xpu-cdi/internal/flagutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

type options struct {
	host         cmdflags.Host
	kind         cmdflags.Kind
	output       string
	format       string
	strategies   cli.StringSlice
	spec         cdispec.Settings
	parsedFormat cdispec.Format
}

// NewCommand returns `xpu-cdi generate`.
func NewCommand(log *logrus.Logger) *cli.Command {
	o := &options{}
	return &cli.Command{
		Name:  "generate",
		Usage: "Discover the host's XPUs and write a CDI spec for them",
		Description: `Reads the Kunlun XPUs of the host (device nodes, /proc/xpu, sysfs: driver 4.x and 5.x) and the driver's
user-space files (XRE libraries, xpu-smi), without any vendor library, and prints a CDI spec
(kind baidu.com/xpu by default) on stdout, or writes it atomically with --output.

Devices are named by index (the N of /dev/xpuN), by PCI address and by serial where serials
are unique, plus "all". Use them as: podman run --device baidu.com/xpu=0 IMAGE

Examples:
  xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml
  xpu-cdi generate --nodes-only --output /etc/cdi/baidu.com-xpu.yaml   # images that ship their own XRE
  xpu-cdi generate --device-name-strategy index --format json
  xpu-cdi generate --host-root /host --output /host/etc/cdi/baidu.com-xpu.yaml  # in a container`,
		Flags:  append(o.host.Flags(), o.flags()...),
		Before: func(c *cli.Context) error { return o.validate(c) },
		Action: func(c *cli.Context) error { return o.run(c.App.Writer, log) },
	}
}

func (o *options) flags() []cli.Flag {
	return append(o.kind.Flags("of the spec"),
		o.host.HostRootFlag(),
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the spec to `FILE` (atomically, mode 0644, creating the directory); default: stdout", EnvVars: []string{"XPU_CDI_OUTPUT"}, Destination: &o.output},
		&cli.StringFlag{Name: "format", Usage: "spec encoding: yaml or json; default: from the --output extension, else yaml", EnvVars: []string{"XPU_CDI_FORMAT"}, Destination: &o.format},
		&cli.StringSliceFlag{Name: "device-name-strategy", Usage: "how devices are named: index, bdf, serial (repeatable); default: all three", EnvVars: []string{"XPU_CDI_DEVICE_NAME_STRATEGY"}, Destination: &o.strategies},
		&cli.BoolFlag{Name: "nodes-only", Usage: "leave out the driver libraries (device nodes and xpu-smi only), for images that ship their own XRE", EnvVars: []string{"XPU_CDI_NODES_ONLY"}, Destination: &o.spec.NodesOnly},
		&cli.StringFlag{Name: "hook-path", Usage: "path of xpu-runtime-hook on the host, named by the spec's hooks", Value: cdispec.DefaultHookPath, EnvVars: []string{"XPU_CDI_HOOK_PATH"}, Destination: &o.spec.HookPath},
		&cli.BoolFlag{Name: "no-hooks", Usage: "emit no hooks: programs in the container then need LD_LIBRARY_PATH set to the XRE folders (/usr/local/xpu/lib64 on XRE 4, /usr/local/xpu/so on XRE 5) to load the XRE", EnvVars: []string{"XPU_CDI_NO_HOOKS"}, Destination: &o.spec.NoHooks},
		&cli.BoolFlag{Name: "no-all-device", Usage: `do not add the "all" device`, EnvVars: []string{"XPU_CDI_NO_ALL_DEVICE"}, Destination: &o.spec.NoAllDevice},
	)
}

func (o *options) validate(c *cli.Context) error {
	if err := o.host.ApplyHostRoot(c); err != nil {
		return err
	}
	o.spec.HostRoot = o.host.HostRoot
	if err := o.kind.Validate(); err != nil {
		return err
	}
	o.spec.Vendor, o.spec.Class = o.kind.Vendor, o.kind.Class
	names, err := cdispec.ParseNameStrategies(flagutil.SplitList(o.strategies.Value()))
	if err != nil {
		return fmt.Errorf("--device-name-strategy: %w", err)
	}
	o.spec.NameStrategies = names
	if o.output != "" {
		if st, err := os.Stat(o.output); err == nil && st.IsDir() {
			return fmt.Errorf("--output %s is a directory; give a file name such as %s/baidu.com-xpu.yaml", o.output, strings.TrimRight(o.output, "/"))
		}
	}
	switch {
	case o.format != "":
		f, err := cdispec.ParseFormat(o.format)
		if err != nil {
			return fmt.Errorf("--format: %w", err)
		}
		o.parsedFormat = f
		if o.output != "" {
			if ext, err := cdispec.FormatForPath(o.output); err != nil {
				return fmt.Errorf("--output: %w", err)
			} else if ext != f {
				return fmt.Errorf("--output %s does not end in .%s as --format %s requires", o.output, f, f)
			}
		}
	case o.output != "":
		f, err := cdispec.FormatForPath(o.output)
		if err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		o.parsedFormat = f
	default:
		o.parsedFormat = cdispec.FormatYAML
	}
	return nil
}

func (o *options) run(stdout io.Writer, log *logrus.Logger) error {
	host, err := o.host.Discover(log)
	if err != nil {
		return err
	}
	for _, w := range host.Warnings {
		log.Warn(w)
	}
	for _, n := range host.Notes {
		log.Debug(n)
	}
	return o.write(stdout, host, log)
}

// write builds the spec of host and prints it on stdout, or writes it to
// --output atomically.
func (o *options) write(stdout io.Writer, host *discover.Host, log *logrus.Logger) error {
	spec, warnings, err := cdispec.New(host, o.spec)
	if err != nil {
		return fmt.Errorf("building the spec for %s: %w", host.DevRoot, err)
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	if len(spec.ContainerEdits.Hooks) > 0 {
		if _, err := os.Stat(filepath.Join(o.host.HostRoot, o.spec.HookPath)); err != nil {
			log.Warnf("the spec names the hook %s, which does not exist on this host (%v): containers will fail to start until it is installed; see --hook-path and --no-hooks", o.spec.HookPath, err)
		}
	}
	if o.output == "" {
		if err := cdispec.ValidateSpec(spec); err != nil {
			return err
		}
		data, err := cdispec.Encode(spec, o.parsedFormat)
		if err != nil {
			return err
		}
		_, err = stdout.Write(data)
		return err
	}
	if err := cdispec.WriteFile(o.output, spec, o.parsedFormat); err != nil {
		return err
	}
	log.Infof("wrote CDI spec %s (kind %s, %d devices, cdiVersion %s)", o.output, spec.Kind, len(spec.Devices), spec.Version)
	return nil
}

// SpecWriter is generate's spec flags (--output, --format, the kind, the
// name strategies, hooks, --host-root) and its way of writing the spec, for
// the commands that change the host and then rewrite its spec (`partition
// apply --output`): one code path for every spec xpu-cdi writes.
type SpecWriter struct{ o options }

// NewSpecWriter returns a SpecWriter; its flags are bound to it.
func NewSpecWriter() *SpecWriter { return &SpecWriter{} }

// Host is the host flags the spec flags go with (--host-root sets them).
func (w *SpecWriter) Host() *cmdflags.Host { return &w.o.host }

// Flags are generate's flags but for the host's (Host().Flags()).
func (w *SpecWriter) Flags() []cli.Flag { return w.o.flags() }

// Validate checks the flags as generate does (and applies --host-root).
func (w *SpecWriter) Validate(c *cli.Context) error { return w.o.validate(c) }

// Output is the --output file; "" when none was given.
func (w *SpecWriter) Output() string { return w.o.output }

// Write writes the spec of host to --output atomically, as `generate
// --output` does; nothing without --output.
func (w *SpecWriter) Write(host *discover.Host, log *logrus.Logger) error {
	if w.o.output == "" {
		return nil
	}
	return w.o.write(io.Discard, host, log)
}
