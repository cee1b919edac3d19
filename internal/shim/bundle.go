package shim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
	"github.com/xpu-cdi/xpu-cdi/internal/config"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// errUnprivilegedEnv is returned when a container without CAP_SYS_ADMIN
// asks for XPUs through XPU_VISIBLE_DEVICES and the configuration does not
// accept that.
var errUnprivilegedEnv = errors.New("XPU_VISIBLE_DEVICES is refused for unprivileged containers")

// errConfig wraps a configuration problem that stops an XPU request.
var errConfig = errors.New("the shim configuration is unusable")

type options struct {
	log          logger.Interface
	configErr    error
	configPath   string
	discoverOpts []discover.Option
	// beforeParse runs between the spec cache's snapshot and the CDI
	// library's parse (tests: a spec changed in between).
	beforeParse func()
}

// Option configures ModifyBundle.
type Option func(*options)

// WithLogger sets the logger (default: discard).
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

// WithConfigError passes the error met while loading the configuration
// (path is the file): a container that asks for XPUs then fails with it, a
// container that asks for none is not affected.
func WithConfigError(path string, err error) Option {
	return func(o *options) { o.configPath, o.configErr = path, err }
}

// withDiscoverOptions adds options to the jit mode's discovery (tests use
// a stat seam for fake hosts).
func withDiscoverOptions(opts ...discover.Option) Option {
	return func(o *options) { o.discoverOpts = append(o.discoverOpts, opts...) }
}

// Result says what ModifyBundle did.
type Result struct {
	// Modified is true when config.json was rewritten.
	Modified bool
	// Mode resolved the request (empty when nothing was asked for).
	Mode config.Mode
	// Devices are the indices of the devices the container got.
	Devices []int
}

// ConfigPath is the bundle's OCI spec.
func ConfigPath(bundle string) string { return filepath.Join(bundle, "config.json") }

// mayRequest is the quick test that lets a bundle asking for no XPU go
// through without a JSON parse: a request needs the variable name or an
// annotation key in the text. A \u escape could hide either, so its presence
// means a full parse.
func mayRequest(data []byte) bool {
	return bytes.Contains(data, []byte(visibleDevicesEnv)) ||
		bytes.Contains(data, []byte("cdi.k8s.io/")) ||
		bytes.Contains(data, []byte(`\u`))
}

// ModifyBundle gives the container of bundle the XPUs it asks for: it reads
// config.json, resolves the request with c and replaces config.json
// atomically. A bundle that asks for no XPU is left alone. On error
// config.json is unchanged.
func ModifyBundle(bundle string, c *config.Config, opts ...Option) (Result, error) {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	o.log = logger.OrDiscard(o.log)

	path := ConfigPath(bundle)
	data, err := os.ReadFile(path)
	if err != nil {
		return Result{}, fmt.Errorf("reading the bundle's OCI spec: %w", err)
	}
	if !mayRequest(data) {
		o.log.Debugf("%s asks for no XPU", path)
		return Result{}, nil
	}
	doc, err := parseConfigDoc(data)
	if err != nil {
		return Result{}, fmt.Errorf("parsing the bundle's OCI spec %s: %w", path, err)
	}
	spec := doc.spec()
	req, err := readRequest(spec, c.Kind())
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(req.Foreign) > 0 {
		o.log.Infof("%s: leaving CDI devices of other kinds to their own runtime: %s", path, strings.Join(req.Foreign, ", "))
	}
	envAsks := req.HasEnv && !envNone(req.Env)
	if len(req.Annotated) == 0 && !envAsks {
		o.log.Debugf("%s asks for no XPU", path)
		return Result{}, nil
	}
	if o.configErr != nil {
		return Result{}, fmt.Errorf("the container asks for XPUs (%s) but %w: %w", req.describe(), errConfig, o.configErr)
	}

	names := append([]string(nil), req.Annotated...)
	if envAsks {
		switch {
		case req.privileged || c.AcceptEnvvarWhenUnprivileged:
			envNames, err := envNames(req.Env, c.Kind())
			if err != nil {
				return Result{}, err
			}
			names = append(names, envNames...)
		case len(req.Annotated) > 0:
			// The annotations come from the orchestrator; the variable may
			// come from the image. It is rewritten below to what was granted.
			o.log.Warnf("%s: ignoring %s=%s of an unprivileged container; it gets the devices of its cdi.k8s.io annotations", path, visibleDevicesEnv, req.Env)
		case c.FailOnRefusedEnvvar:
			return Result{}, fmt.Errorf("%w: the container asks for %s=%s but does not hold CAP_SYS_ADMIN "+
				"(an image can set the variable, so only privileged containers may use it by default). "+
				"To allow it, set accept-envvar-when-unprivileged = true in %s, run the container privileged, "+
				"or ask for the devices with a cdi.k8s.io annotation; to start such containers without XPUs "+
				"instead of failing, set fail-on-refused-envvar = false",
				errUnprivilegedEnv, visibleDevicesEnv, req.Env, o.configFile())
		default:
			// Framework images bake the variable in; a container that
			// wants no XPU must still run where the shim is the default
			// runtime. Nothing in the bundle is changed.
			o.log.Warnf("%s: ignoring %s=%s: the container does not hold CAP_SYS_ADMIN and an image can set the variable; "+
				"it starts without XPUs (accept-envvar-when-unprivileged = true in %s accepts the variable, "+
				"fail-on-refused-envvar = true makes this an error)", path, visibleDevicesEnv, req.Env, o.configFile())
			return Result{}, nil
		}
	}

	r, err := newResolver(c, o, names)
	if err != nil {
		return Result{}, err
	}
	var unknown []string
	for _, n := range names {
		if !r.has(n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return Result{}, fmt.Errorf("%w %s (asked for by %s); valid names of %s (%s mode): %s",
			errUnknownDevice, strings.Join(unknown, ", "), req.describe(), c.Kind(), r.mode(),
			strings.Join(sortNames(r.names()), ", "))
	}
	edits, err := r.inject(spec, names)
	if err != nil {
		return Result{}, err
	}
	granted := grantedIndices(edits)
	touched := editedMembers(edits)
	if spec.Process != nil {
		setVisibleDevices(spec.Process, joinInts(granted))
		touched = append(touched, memberEnv)
	}
	out, err := doc.encode(touched...)
	if err != nil {
		return Result{}, fmt.Errorf("encoding the OCI spec for %s: %w", path, err)
	}
	// Atomic for the runtime that reads it next; no fsync: the bundle only
	// lives for this creation, where fsyncs would be a large part of the
	// shim's own time (docs/benchmarks.md).
	if err := atomicfile.WriteFile(path, out, atomicfile.WithKeepMode(), atomicfile.WithoutSync()); err != nil {
		return Result{}, err
	}
	o.log.Infof("%s: gave XPUs %s (%s mode, asked: %s)", path, joinInts(granted), r.mode(), req.describe())
	return Result{Modified: true, Mode: r.mode(), Devices: granted}, nil
}

func (o *options) configFile() string {
	if o.configPath != "" {
		return o.configPath
	}
	return config.Path(os.Getenv)
}

// newResolver picks the mode: cdi and jit as configured; auto is cdi when
// the spec directories hold a device of the kind, jit otherwise. names are
// the qualified names asked for: jit mode discovers no more of the host than
// they need.
func newResolver(c *config.Config, o *options, names []string) (*editsResolver, error) {
	mode := c.Mode
	if mode == config.ModeCDI || mode == config.ModeAuto {
		r, specErrs, err := newCDIResolver(c, o)
		if err != nil {
			return nil, err
		}
		var problems error
		if len(specErrs) > 0 {
			problems = fmt.Errorf("problems in the spec files: %s", strings.Join(specErrs, "; "))
			o.log.Warnf("reading the CDI specs in %s: %v", strings.Join(c.SpecDirs, ", "), problems)
		}
		switch {
		case r != nil:
			o.log.Debugf("%s mode: resolving %s from %s", mode, c.Kind(), strings.Join(c.SpecDirs, ", "))
			return r, nil
		case mode == config.ModeCDI:
			return nil, errors.Join(fmt.Errorf("mode cdi: no CDI spec of %s in %s; run `xpu-cdi generate --output /etc/cdi/%s-%s.yaml` or set mode = \"jit\"",
				c.Kind(), strings.Join(c.SpecDirs, ", "), c.Vendor, c.Class), problems)
		}
		o.log.Debugf("auto mode: no CDI spec of %s in %s, discovering the host", c.Kind(), strings.Join(c.SpecDirs, ", "))
	}
	return newJITResolver(c, o, names)
}

// describe names what the container asked for, for messages.
func (r request) describe() string {
	var parts []string
	if len(r.Annotated) > 0 {
		parts = append(parts, "cdi.k8s.io annotations "+strings.Join(r.Annotated, ","))
	}
	if r.HasEnv && !envNone(r.Env) {
		parts = append(parts, visibleDevicesEnv+"="+r.Env)
	}
	return strings.Join(parts, " and ")
}
