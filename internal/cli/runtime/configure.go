package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"time"

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
	mode              string
	dockerd           string
	dockerMode        runtimeconfig.DockerMode
}

// dockerdTimeout bounds `dockerd --version`; dockerdMaxOutput bounds what
// is read of its output.
const (
	dockerdTimeout   = 10 * time.Second
	dockerdMaxOutput = 4 << 10
)

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

Docker: on Docker 25 or later (asked with "dockerd --version") it turns on Docker's own CDI
(features.cdi, plus cdi-spec-dirs where they differ from Docker's defaults) and registers no shim:
"docker run --device baidu.com/xpu=0" then works. Before 25 (Debian 12's 20.10) it registers the
xpu runtime shim. --mode cdi|shim overrides the choice (shim for users who select devices with
XPU_VISIBLE_DEVICES); --revert undoes either mode.

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
			&cli.StringFlag{
				Name: "mode",
				Usage: "docker only: cdi (Docker's own CDI, no shim; Docker 25+), shim (the xpu runtime), or auto " +
					"(cdi from Docker 25, asked with `dockerd --version`)",
				Value:       "auto",
				EnvVars:     []string{"XPU_CDI_RUNTIME_MODE"},
				Destination: &o.mode,
			},
			&cli.StringFlag{
				Name:        "dockerd",
				Usage:       "docker only: the dockerd whose version chooses the mode (--mode auto)",
				Value:       "dockerd",
				EnvVars:     []string{"XPU_CDI_RUNTIME_DOCKERD"},
				Destination: &o.dockerd,
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
	o.mode = strings.ToLower(strings.TrimSpace(o.mode))
	switch {
	case o.mode == "auto":
	case o.runtime != string(runtimeconfig.Docker):
		return fmt.Errorf("--mode %s: the mode applies to --runtime docker only", o.mode)
	default:
		m, err := runtimeconfig.ParseDockerMode(o.mode)
		if err != nil {
			return fmt.Errorf("--mode: %w (or auto)", err)
		}
		o.dockerMode = m
	}
	return nil
}

// chooseDockerMode sets the docker mode of --mode auto from the version of
// the dockerd installed (--dockerd), and says which mode it chose and why.
func (o *configureOptions) chooseDockerMode(w io.Writer) error {
	if o.runtime != string(runtimeconfig.Docker) {
		return nil
	}
	if o.dockerMode != "" {
		fmt.Fprintf(w, "docker: mode %s (--mode)\n", o.dockerMode)
		return nil
	}
	if o.revert {
		// The revert record says what was set, whichever the mode.
		return nil
	}
	v, err := dockerdVersion(o.dockerd, dockerdTimeout)
	if err != nil {
		return err
	}
	o.dockerMode = v.Mode()
	why := "Docker 25 and later read CDI specs themselves: no runtime shim"
	if o.dockerMode == runtimeconfig.DockerModeShim {
		why = "Docker before 25 has no CDI: the xpu runtime shim (docker run --runtime xpu)"
	}
	fmt.Fprintf(w, "docker: mode %s (dockerd %s: %s; --mode overrides)\n", o.dockerMode, v.Text, why)
	return nil
}

// dockerdVersion runs `dockerd --version`, bounded in time and output.
func dockerdVersion(dockerd string, timeout time.Duration) (runtimeconfig.DockerVersion, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, dockerd, "--version")
	out := &limitedBuffer{max: dockerdMaxOutput}
	cmd.Stdout = out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return runtimeconfig.DockerVersion{}, fmt.Errorf("`%s --version` gave no answer within %s: pass --mode cdi or --mode shim", dockerd, timeout)
	case err != nil:
		return runtimeconfig.DockerVersion{}, fmt.Errorf("asking `%s --version` which docker mode to use: %w; pass --dockerd PATH, or --mode cdi or --mode shim", dockerd, err)
	}
	v, err := runtimeconfig.ParseDockerVersion(out.Bytes())
	if err != nil {
		return v, fmt.Errorf("`%s --version`: %w; pass --mode cdi or --mode shim", dockerd, err)
	}
	return v, nil
}

// limitedBuffer keeps the first max bytes written to it and discards the
// rest (a program's output, read without bound otherwise).
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
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
	if o.dockerMode != "" {
		opts = append(opts, runtimeconfig.WithDockerMode(o.dockerMode))
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
	if err := o.chooseDockerMode(w); err != nil {
		return err
	}
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
