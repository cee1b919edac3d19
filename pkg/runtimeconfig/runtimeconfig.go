package runtimeconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Engine names a container engine whose configuration this package edits.
type Engine string

// Supported engines.
const (
	Containerd Engine = "containerd"
	CRIO       Engine = "crio"
	Docker     Engine = "docker"
	Podman     Engine = "podman"
)

// Engines lists the supported engines in a stable order.
func Engines() []Engine { return []Engine{Containerd, CRIO, Docker, Podman} }

// Defaults.
const (
	DefaultRuntimeName = "xpu"
	DefaultRuntimePath = "/usr/bin/xpu-container-runtime"

	DefaultContainerdConfig = "/etc/containerd/config.toml"
	DefaultContainerdDropIn = "/etc/containerd/conf.d/99-xpu.toml"
	DefaultCRIOConfig       = "/etc/crio/crio.conf"
	DefaultCRIODropIn       = "/etc/crio/crio.conf.d/99-xpu.conf"
	DefaultDockerConfig     = "/etc/docker/daemon.json"
	DefaultPodmanConfig     = "/etc/containers/containers.conf"
	DefaultPodmanDropIn     = "/etc/containers/containers.conf.d/99-xpu.conf"
)

// DefaultCDISpecDirs are the directories the engines are told to read CDI
// specs from: the CDI library's defaults, in its priority order.
var DefaultCDISpecDirs = cdiapi.DefaultSpecDirs

// Errors callers can test for with errors.Is.
var (
	ErrSymlink            = errors.New("path is a symbolic link")
	ErrParse              = errors.New("configuration file does not parse")
	ErrUnsupportedVersion = errors.New("unsupported containerd config version")
	ErrNotOurs            = errors.New("file was not written by xpu-cdi")
	ErrConcurrentEdit     = errors.New("file changed concurrently")
	ErrInvalidOption      = errors.New("invalid option")
	ErrUnsupportedDocker  = errors.New("unrecognised Docker version")
)

type options struct {
	configPath        string
	dropInPath        string
	noDropIn          bool
	runtimeName       string
	runtimePath       string
	setAsDefault      bool
	enableCDI         bool
	cdiSpecDirs       []string
	containerdVersion int
	dockerMode        DockerMode
	log               logger.Interface
}

// Option configures a Configurator.
type Option func(*options)

// WithConfigPath sets the engine's main configuration file.
func WithConfigPath(p string) Option { return func(o *options) { o.configPath = p } }

// WithDropInPath sets the drop-in file to write (containerd, CRI-O, Podman).
func WithDropInPath(p string) Option { return func(o *options) { o.dropInPath = p } }

// WithoutDropIn edits the main configuration file instead of writing a
// drop-in (CRI-O and Podman; containerd always uses a drop-in).
func WithoutDropIn() Option { return func(o *options) { o.noDropIn = true } }

// WithRuntimeName sets the name the shim is registered under.
func WithRuntimeName(n string) Option { return func(o *options) { o.runtimeName = n } }

// WithRuntimePath sets the shim's absolute path.
func WithRuntimePath(p string) Option { return func(o *options) { o.runtimePath = p } }

// WithSetAsDefault makes the shim the engine's default runtime.
func WithSetAsDefault(v bool) Option { return func(o *options) { o.setAsDefault = v } }

// WithCDI enables CDI in the engine and points it at DefaultCDISpecDirs.
func WithCDI(v bool) Option { return func(o *options) { o.enableCDI = v } }

// WithContainerdConfigVersion sets the config version (2 or 3) used when the
// containerd main file does not exist yet. An existing file's own version
// always wins.
func WithContainerdConfigVersion(v int) Option {
	return func(o *options) { o.containerdVersion = v }
}

// WithDockerMode chooses how Docker is configured (DockerModeShim, the
// default, or DockerModeCDI).
func WithDockerMode(m DockerMode) Option { return func(o *options) { o.dockerMode = m } }

// WithLogger sets the logger; the default is logger.Discard.
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

// Configurator edits one engine's configuration.
type Configurator struct {
	engine Engine
	o      options
}

// New returns a Configurator for engine. Unset paths take the engine's
// defaults.
func New(engine Engine, opts ...Option) (*Configurator, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.runtimeName == "" {
		o.runtimeName = DefaultRuntimeName
	}
	if o.runtimePath == "" {
		o.runtimePath = DefaultRuntimePath
	}
	if o.cdiSpecDirs == nil {
		o.cdiSpecDirs = slices.Clone(DefaultCDISpecDirs)
	}
	o.log = logger.OrDiscard(o.log)

	switch engine {
	case Containerd:
		setDefault(&o.configPath, DefaultContainerdConfig)
		setDefault(&o.dropInPath, DefaultContainerdDropIn)
		if o.noDropIn {
			return nil, fmt.Errorf("containerd is always configured through a drop-in file (it holds the copy of the CRI plugin section older releases need); drop --no-drop-in: %w", ErrInvalidOption)
		}
	case CRIO:
		setDefault(&o.configPath, DefaultCRIOConfig)
		setDefault(&o.dropInPath, DefaultCRIODropIn)
	case Docker:
		setDefault(&o.configPath, DefaultDockerConfig)
		if o.dropInPath != "" {
			return nil, fmt.Errorf("docker has no drop-in directory; daemon.json is edited in place: drop --drop-in-file: %w", ErrInvalidOption)
		}
		o.noDropIn = true
		if o.dockerMode == "" {
			o.dockerMode = DockerModeShim
		}
		if _, err := ParseDockerMode(string(o.dockerMode)); err != nil {
			return nil, err
		}
		if o.dockerMode == DockerModeCDI && o.setAsDefault {
			return nil, fmt.Errorf("--set-as-default makes the runtime shim Docker's default, and docker mode cdi registers no shim: drop one: %w", ErrInvalidOption)
		}
	case Podman:
		setDefault(&o.configPath, DefaultPodmanConfig)
		setDefault(&o.dropInPath, DefaultPodmanDropIn)
	default:
		return nil, fmt.Errorf("unknown runtime %q (want one of %v): %w", engine, Engines(), ErrInvalidOption)
	}
	if engine != Docker && o.dockerMode != "" {
		return nil, fmt.Errorf("a docker mode (%s) was given for %s: it applies to docker only: %w", o.dockerMode, engine, ErrInvalidOption)
	}
	if !validRuntimeName(o.runtimeName) {
		return nil, fmt.Errorf("runtime name %q: use letters, digits, '-', '_' or '.': %w", o.runtimeName, ErrInvalidOption)
	}
	for _, p := range []*string{&o.configPath, &o.dropInPath, &o.runtimePath} {
		if *p == "" {
			continue
		}
		if !filepath.IsAbs(*p) {
			return nil, fmt.Errorf("path %q must be absolute: %w", *p, ErrInvalidOption)
		}
		*p = filepath.Clean(*p)
	}
	if o.containerdVersion != 0 && o.containerdVersion != 2 && o.containerdVersion != 3 {
		return nil, fmt.Errorf("containerd config version %d: want 2 (containerd 1.7) or 3 (containerd 2.x): %w",
			o.containerdVersion, ErrUnsupportedVersion)
	}
	return &Configurator{engine: engine, o: o}, nil
}

func setDefault(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func validRuntimeName(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return true
}

// Plan is the set of file changes an operation needs, plus notes for the
// admin (for example that an engine needs nothing for CDI).
type Plan struct {
	Engine  Engine
	Changes []FileChange
	Notes   []string
}

// Changed reports whether applying the plan would alter any file.
func (p *Plan) Changed() bool {
	for _, c := range p.Changes {
		if c.Changed() {
			return true
		}
	}
	return false
}

// Apply performs the plan's changes in order.
func (p *Plan) Apply() error {
	for i, c := range p.Changes {
		if err := c.apply(); err != nil {
			return errors.Join(err, p.rollback(i))
		}
	}
	return nil
}

// rollback undoes the first n changes of the plan, last first, after the
// change n failed: a failed Apply leaves every file as it was, in
// particular no revert record of an edit that was never written (which a
// later --revert would act on). A file changed by someone else meanwhile is
// left alone (ErrConcurrentEdit, reported).
func (p *Plan) rollback(n int) error {
	var errs []error
	for i := n - 1; i >= 0; i-- {
		c := p.Changes[i]
		if !c.Changed() {
			continue
		}
		undo := FileChange{Path: c.Path, Old: c.New, New: c.Old}
		if err := undo.apply(); err != nil {
			errs = append(errs, fmt.Errorf("undoing the change of %s after that failure: %w", c.Path, err))
		}
	}
	return errors.Join(errs...)
}

// Configure computes the changes that register the runtime.
func (c *Configurator) Configure() (*Plan, error) {
	var (
		p   = &Plan{Engine: c.engine}
		err error
	)
	switch c.engine {
	case Containerd:
		err = c.configureContainerd(p)
	case CRIO:
		err = c.configureCRIO(p)
	case Docker:
		err = c.configureDocker(p)
	case Podman:
		err = c.configurePodman(p)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Revert computes the changes that undo Configure.
func (c *Configurator) Revert() (*Plan, error) {
	var (
		p   = &Plan{Engine: c.engine}
		err error
	)
	switch c.engine {
	case Containerd:
		err = c.revertContainerd(p)
	case CRIO, Podman:
		err = c.revertDropInOrMain(p)
	case Docker:
		err = c.revertDocker(p)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}
