package runtime

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/pkg/runtimeconfig"
)

// configureOptions holds the flags of `runtime configure`.
type configureOptions struct {
	runtime           string
	config            string
	dropInFile        string
	noDropIn          bool
	runtimeName       string
	runtimePath       string
	setAsDefault      bool
	cdiEnabled        bool
	dryRun            bool
	revert            bool
	containerdVersion int
}

// NewCommand returns the `runtime` command with its `configure` subcommand.
func NewCommand(log *logrus.Logger) *cli.Command {
	return &cli.Command{
		Name:  "runtime",
		Usage: "Configure container engines to use the XPU runtime shim and CDI",
		Subcommands: []*cli.Command{
			newConfigureCommand(log),
		},
	}
}

func newConfigureCommand(log *logrus.Logger) *cli.Command {
	o := &configureOptions{}
	return &cli.Command{
		Name:  "configure",
		Usage: "Register the xpu runtime (and optionally CDI) in an engine's configuration",
		Description: `Writes a drop-in file (containerd, CRI-O, Podman) or edits daemon.json in place (Docker).
Running it twice changes nothing; --revert removes exactly what it added.
Restart the engine afterwards (systemctl restart containerd|crio|docker; Podman reads its config per command).

Default files:
  containerd  main /etc/containerd/config.toml (imports line added), drop-in /etc/containerd/conf.d/99-xpu.toml
  crio        drop-in /etc/crio/crio.conf.d/99-xpu.conf (main /etc/crio/crio.conf with --no-drop-in)
  docker      /etc/docker/daemon.json (edited in place; record of the edit in daemon.json.xpu-cdi-revert.json)
  podman      drop-in /etc/containers/containers.conf.d/99-xpu.conf (main /etc/containers/containers.conf with --no-drop-in)`,
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name: "runtime", Aliases: []string{"r"}, Required: true,
				Usage:       "container engine to configure: containerd, crio, docker or podman",
				EnvVars:     []string{"XPU_CDI_RUNTIME"},
				Destination: &o.runtime,
			},
			&cli.StringFlag{
				Name:        "config",
				Usage:       "the engine's main config file (default: the engine's standard path, see above)",
				EnvVars:     []string{"XPU_CDI_RUNTIME_CONFIG"},
				Destination: &o.config,
			},
			&cli.StringFlag{
				Name:        "drop-in-file",
				Usage:       "drop-in file to write for containerd, crio or podman (default: the engine's 99-xpu file, see above)",
				EnvVars:     []string{"XPU_CDI_RUNTIME_DROP_IN_FILE"},
				Destination: &o.dropInFile,
			},
			&cli.BoolFlag{
				Name:        "no-drop-in",
				Usage:       "crio and podman: edit the main config in place instead of writing a drop-in (comments in it are lost)",
				EnvVars:     []string{"XPU_CDI_RUNTIME_NO_DROP_IN"},
				Destination: &o.noDropIn,
			},
			&cli.StringFlag{
				Name:        "runtime-name",
				Usage:       "name the shim is registered under",
				Value:       runtimeconfig.DefaultRuntimeName,
				EnvVars:     []string{"XPU_CDI_RUNTIME_NAME"},
				Destination: &o.runtimeName,
			},
			&cli.StringFlag{
				Name:        "runtime-path",
				Usage:       "absolute path of the shim binary",
				Value:       runtimeconfig.DefaultRuntimePath,
				EnvVars:     []string{"XPU_CDI_RUNTIME_PATH"},
				Destination: &o.runtimePath,
			},
			&cli.BoolFlag{
				Name:        "set-as-default",
				Usage:       "make the shim the engine's default runtime",
				EnvVars:     []string{"XPU_CDI_RUNTIME_SET_AS_DEFAULT"},
				Destination: &o.setAsDefault,
			},
			&cli.BoolFlag{
				Name: "cdi.enabled",
				Usage: "enable CDI and read specs from /etc/cdi and /var/run/cdi: containerd enable_cdi + cdi_spec_dirs, " +
					"docker features.cdi + cdi-spec-dirs (Docker 25+), crio cdi_spec_dirs; podman needs nothing",
				EnvVars:     []string{"XPU_CDI_RUNTIME_CDI_ENABLED"},
				Destination: &o.cdiEnabled,
			},
			&cli.BoolFlag{
				Name:        "dry-run",
				Usage:       "print the resulting file(s) to stdout and write nothing",
				EnvVars:     []string{"XPU_CDI_RUNTIME_DRY_RUN"},
				Destination: &o.dryRun,
			},
			&cli.BoolFlag{
				Name:        "revert",
				Usage:       "remove what an earlier configure added, and nothing else",
				EnvVars:     []string{"XPU_CDI_RUNTIME_REVERT"},
				Destination: &o.revert,
			},
			&cli.IntFlag{
				Name: "containerd-config-version",
				Usage: "containerd config version (2 for containerd 1.7, 3 for 2.x) used only when the main config does not exist; " +
					"0 asks `containerd --version` (an existing file's version always wins)",
				Value:       0,
				EnvVars:     []string{"XPU_CDI_RUNTIME_CONTAINERD_CONFIG_VERSION"},
				Destination: &o.containerdVersion,
			},
		},
		Before: func(c *cli.Context) error { return o.validate(c) },
		Action: func(c *cli.Context) error { return o.run(c.App.Writer, log) },
	}
}

func (o *configureOptions) validate(c *cli.Context) error {
	o.runtime = strings.ToLower(strings.TrimSpace(o.runtime))
	if o.runtime == "cri-o" {
		o.runtime = string(runtimeconfig.CRIO)
	}
	known := false
	for _, e := range runtimeconfig.Engines() {
		known = known || string(e) == o.runtime
	}
	if !known {
		return fmt.Errorf("--runtime %q: want one of containerd, crio, docker, podman", o.runtime)
	}
	if o.noDropIn && c.IsSet("drop-in-file") {
		return errors.New("--no-drop-in and --drop-in-file contradict each other: pass one")
	}
	return nil
}

func (o *configureOptions) configurator(log *logrus.Logger) (*runtimeconfig.Configurator, error) {
	opts := []runtimeconfig.Option{
		runtimeconfig.WithConfigPath(o.config),
		runtimeconfig.WithDropInPath(o.dropInFile),
		runtimeconfig.WithRuntimeName(o.runtimeName),
		runtimeconfig.WithRuntimePath(o.runtimePath),
		runtimeconfig.WithSetAsDefault(o.setAsDefault),
		runtimeconfig.WithCDI(o.cdiEnabled),
		runtimeconfig.WithContainerdConfigVersion(o.containerdVersion),
	}
	if log != nil {
		opts = append(opts, runtimeconfig.WithLogger(log))
	}
	if o.noDropIn {
		opts = append(opts, runtimeconfig.WithoutDropIn())
	}
	c, err := runtimeconfig.New(runtimeconfig.Engine(o.runtime), opts...)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (o *configureOptions) run(w io.Writer, log *logrus.Logger) error {
	c, err := o.configurator(log)
	if err != nil {
		return err
	}
	var plan *runtimeconfig.Plan
	if o.revert {
		plan, err = c.Revert()
	} else {
		plan, err = c.Configure()
		if errors.Is(err, runtimeconfig.ErrUnsupportedVersion) && o.runtime == string(runtimeconfig.Containerd) && o.containerdVersion == 0 {
			// The main file is missing: ask the installed containerd.
			v, derr := detectContainerdConfigVersion()
			if derr != nil {
				return fmt.Errorf("%w (and %w)", err, derr)
			}
			o.containerdVersion = v
			if c, err = o.configurator(log); err != nil {
				return err
			}
			plan, err = c.Configure()
		}
	}
	if err != nil {
		return err
	}
	for _, n := range plan.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if o.dryRun {
		return printPlan(w, plan)
	}
	if !plan.Changed() {
		if o.revert {
			fmt.Fprintf(w, "%s: nothing to revert\n", o.runtime)
		} else {
			fmt.Fprintf(w, "%s: already configured, nothing changed\n", o.runtime)
		}
		return nil
	}
	if err := plan.Apply(); err != nil {
		return err
	}
	for _, ch := range plan.Changes {
		switch {
		case !ch.Changed():
		case ch.Delete():
			fmt.Fprintf(w, "removed %s\n", ch.Path)
		case ch.Old == nil:
			fmt.Fprintf(w, "created %s\n", ch.Path)
		default:
			fmt.Fprintf(w, "updated %s\n", ch.Path)
		}
	}
	fmt.Fprintf(w, "restart %s for the change to take effect\n", restartHint(o.runtime))
	return nil
}

func restartHint(engine string) string {
	switch engine {
	case "podman":
		return "nothing (podman reads its config on every command); done"
	default:
		return engine + " (systemctl restart " + engine + ")"
	}
}

func printPlan(w io.Writer, plan *runtimeconfig.Plan) error {
	if !plan.Changed() {
		_, err := fmt.Fprintf(w, "%s: already configured, nothing would change\n", plan.Engine)
		return err
	}
	for _, ch := range plan.Changes {
		if !ch.Changed() {
			continue
		}
		if ch.Delete() {
			fmt.Fprintf(w, "# would remove %s\n", ch.Path)
			continue
		}
		fmt.Fprintf(w, "# would write %s\n", ch.Path)
		if _, err := w.Write(ch.New); err != nil {
			return fmt.Errorf("writing dry-run output: %w", err)
		}
	}
	return nil
}

var containerdVersionRE = regexp.MustCompile(`\sv?(\d+)\.\d+`)

func detectContainerdConfigVersion() (int, error) {
	out, err := exec.Command("containerd", "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("asking `containerd --version` for the config version: %w; pass --containerd-config-version", err)
	}
	m := containerdVersionRE.FindSubmatch(out)
	switch {
	case m == nil:
		return 0, fmt.Errorf("cannot read a version from `containerd --version` output %q; pass --containerd-config-version", out)
	case string(m[1]) == "1":
		return 2, nil
	default:
		return 3, nil
	}
}
