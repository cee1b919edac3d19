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
	"github.com/xpu-cdi/xpu-cdi/internal/xpurequest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// MaxConfigSize bounds the bundle's config.json as the shim reads it (the
// hook's bound on the same file): engines write a few KB to a few hundred.
const MaxConfigSize = 16 << 20

// errConfig wraps a configuration problem that stops an XPU request.
var errConfig = errors.New("the shim configuration is unusable")

// Settings are what ModifyBundle takes besides the configuration; the zero
// value is usable.
type Settings struct {
	// Log is the logger (default: discard).
	Log logger.Interface
	// ConfigErr is the error met while loading the configuration file
	// ConfigPath: a container that asks for XPUs then fails with it, a
	// container that asks for none is not affected.
	ConfigPath string
	ConfigErr  error

	// Test seams: options of the jit mode's discovery (a stat seam for fake
	// hosts), and a call between the read of the spec files and their
	// resolution (a spec changed in between).
	discoverOpts []discover.Option
	beforeParse  func()
}

type options struct {
	resolverOptions
	configErr  error
	configPath string
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
	return bytes.Contains(data, []byte(xpurequest.VisibleDevicesEnv)) ||
		bytes.Contains(data, []byte("cdi.k8s.io/")) ||
		bytes.Contains(data, []byte(xpurequest.MountDir+"/")) ||
		bytes.Contains(data, []byte(`\u`))
}

// ModifyBundle gives the container of bundle the XPUs it asks for, in
// this order: it reads config.json and the request in it (readRequest),
// decides what the container gets (decideGrant), resolves those names to
// CDI edits (newResolver: cdi or jit mode), applies them (applyEdits) and
// replaces config.json atomically with the members they changed. A bundle
// that asks for no XPU, or whose request is refused without an error, is
// left alone. On error config.json is unchanged.
func ModifyBundle(bundle string, c *config.Config, s Settings) (Result, error) {
	o := &options{
		resolverOptions: resolverOptions{log: logger.OrDiscard(s.Log), discoverOpts: s.discoverOpts, beforeParse: s.beforeParse},
		configErr:       s.ConfigErr,
		configPath:      s.ConfigPath,
	}

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
	if !req.asks() {
		o.log.Debugf("%s asks for no XPU", path)
		return Result{}, nil
	}
	if o.configErr != nil {
		return Result{}, fmt.Errorf("the container asks for XPUs (%s) but %w: %w", req.describe(), errConfig, o.configErr)
	}
	g, err := decideGrant(req, grantPolicy{
		Kind:                         c.Kind(),
		AcceptEnvvarWhenUnprivileged: c.AcceptEnvvarWhenUnprivileged,
		FailOnRefusedEnvvar:          c.FailOnRefusedEnvvar,
		AcceptDevicePluginMounts:     c.AcceptDevicePluginMounts,
		ConfigFile:                   o.configFile(),
	})
	if err != nil {
		return Result{}, err
	}
	if g.Warning != "" {
		o.log.Warnf("%s: %s", path, g.Warning)
	}
	if g.Refused {
		return Result{}, nil
	}
	names := g.Names
	r, err := newResolver(c, o.resolverOptions, names)
	if err != nil {
		return Result{}, err
	}
	if err := r.checkNames(names, req.describe()); err != nil {
		return Result{}, err
	}
	got, touched, err := applyEdits(doc, r, names)
	if err != nil {
		return Result{}, err
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
	o.log.Infof("%s: gave XPUs %s (%s mode, asked: %s)", path, discover.JoinIndices(got), r.mode(), req.describe())
	return Result{Modified: true, Mode: r.mode(), Devices: got}, nil
}

// applyEdits applies the edits of names to the view of doc and sets
// XPU_VISIBLE_DEVICES to the indices of the devices the container got. It
// returns those and the members of config.json that changed.
func applyEdits(doc *configDoc, r *editsResolver, names []string) (got []int, touched []string, err error) {
	spec := doc.spec()
	edits, err := r.inject(spec, names)
	if err != nil {
		return nil, nil, err
	}
	got = grantedIndices(edits)
	touched = editedMembers(edits)
	if spec.Process != nil {
		setVisibleDevices(spec.Process, got)
		touched = append(touched, memberEnv)
	}
	return got, touched, nil
}

func (o *options) configFile() string {
	if o.configPath != "" {
		return o.configPath
	}
	return config.Path(os.Getenv)
}
