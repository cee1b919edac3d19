package shim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/atomicfile"
	"github.com/xpu-cdi/xpu-cdi/internal/config"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// errUnprivilegedEnv is returned when an unprivileged container (see
// Privileged) asks for XPUs through XPU_VISIBLE_DEVICES and the
// configuration does not accept that.
var errUnprivilegedEnv = errors.New("XPU_VISIBLE_DEVICES is refused for unprivileged containers")

// MaxConfigSize bounds the bundle's config.json as the shim reads it (the
// hook's bound on the same file): engines write a few KB to a few hundred.
const MaxConfigSize = 16 << 20

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
// through without a JSON parse: a request needs the variable name, an
// annotation key or the device plugin's mount directory in the text. A \u
// escape could hide any, so its presence means a full parse.
func mayRequest(data []byte) bool {
	return bytes.Contains(data, []byte(visibleDevicesEnv)) ||
		bytes.Contains(data, []byte("cdi.k8s.io/")) ||
		bytes.Contains(data, []byte(DeviceListMountDir+"/")) ||
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
	// Without blocking (a FIFO would hang the engine's create), regular
	// files only, bounded.
	data, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, 0, MaxConfigSize)
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
	if len(req.Unused) > 0 {
		o.log.Infof("%s: not granting from the annotations %s: CRI-O copies a pod's annotations into every container "+
			"and has resolved the container's own cdi.k8s.io devices itself", path, strings.Join(req.Unused, ", "))
	}
	envAsks := req.HasEnv && !envNone(req.Env)
	granted := req.granted()
	if len(granted) == 0 && !envAsks {
		o.log.Debugf("%s asks for no XPU", path)
		return Result{}, nil
	}
	if o.configErr != nil {
		return Result{}, fmt.Errorf("the container asks for XPUs (%s) but %w: %w", req.describe(), errConfig, o.configErr)
	}

	names := granted
	if envAsks {
		switch {
		case req.privileged || (c.AcceptEnvvarWhenUnprivileged && !req.cri):
			envNames, err := envNames(req.Env, c.Kind())
			if err != nil {
				return Result{}, err
			}
			names = append(names, envNames...)
		case len(granted) > 0:
			// The annotations and mounts come from the orchestrator; the
			// variable may come from the image or the pod. It is rewritten
			// below to what was granted.
			o.log.Warnf("%s: ignoring %s=%s of an unprivileged container; it gets the devices it was granted (%s)",
				path, visibleDevicesEnv, truncate(req.Env), req.describeGrant())
		case c.FailOnRefusedEnvvar:
			return Result{}, fmt.Errorf("%w: the container asks for %s=%s but is not privileged (its device cgroup rules "+
				"do not allow every device; an image or a pod author can set the variable, so %s). "+
				"Run the container privileged, or ask for the devices with a cdi.k8s.io annotation or the device plugin; "+
				"to start such containers without XPUs instead of failing, set fail-on-refused-envvar = false in %s",
				errUnprivilegedEnv, visibleDevicesEnv, truncate(req.Env), req.envPolicy(o.configFile()), o.configFile())
		default:
			// Framework images bake the variable in; a container that
			// wants no XPU must still run where the shim is the default
			// runtime. Nothing in the bundle is changed.
			o.log.Warnf("%s: ignoring %s=%s: the container is not privileged and an image or a pod author can set the variable (%s); "+
				"it starts without XPUs (fail-on-refused-envvar = true in %s makes this an error)",
				path, visibleDevicesEnv, truncate(req.Env), req.envPolicy(o.configFile()), o.configFile())
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
			errUnknownDevice, truncate(strings.Join(unknown, ", ")), req.describe(), c.Kind(), r.mode(),
			truncate(strings.Join(sortNames(r.names()), ", ")))
	}
	edits, err := r.inject(spec, names)
	if err != nil {
		return Result{}, err
	}
	got := grantedIndices(edits)
	touched := editedMembers(edits)
	if spec.Process != nil {
		setVisibleDevices(spec.Process, joinInts(got))
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
	o.log.Infof("%s: gave XPUs %s (%s mode, asked: %s)", path, joinInts(got), r.mode(), req.describe())
	return Result{Modified: true, Mode: r.mode(), Devices: got}, nil
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

// describeGrant names what the orchestrator granted, for messages.
func (r request) describeGrant() string {
	var parts []string
	if len(r.Annotated) > 0 {
		parts = append(parts, "cdi.k8s.io annotations "+truncate(strings.Join(r.Annotated, ",")))
	}
	if len(r.Mounted) > 0 {
		parts = append(parts, "device plugin mounts "+truncate(strings.Join(r.Mounted, ",")))
	}
	return strings.Join(parts, " and ")
}

// describe names what the container asked for, for messages.
func (r request) describe() string {
	parts := []string{}
	if g := r.describeGrant(); g != "" {
		parts = append(parts, g)
	}
	if r.HasEnv && !envNone(r.Env) {
		parts = append(parts, visibleDevicesEnv+"="+truncate(r.Env))
	}
	return strings.Join(parts, " and ")
}

// envPolicy says why the variable of an unprivileged container is refused.
// file is the shim's configuration file.
func (r request) envPolicy(file string) string {
	if r.cri {
		return "on a Kubernetes node (a spec from containerd's CRI or CRI-O) the variable is never taken from an unprivileged container"
	}
	return "only privileged containers may use it unless accept-envvar-when-unprivileged = true in " + file
}

// maxQuoted bounds what a message quotes of a value from the spec: an
// annotation or variable of megabytes would otherwise be copied whole into
// every log line and error about it.
const maxQuoted = 512

// truncate cuts s to maxQuoted bytes, saying how much was left out.
func truncate(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:maxQuoted], len(s)-maxQuoted)
}
