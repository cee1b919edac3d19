package sharing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/names"
)

// Strategies, as the sharing-strategy node label and NVIDIA's
// nvidia.com/gpu.sharing-strategy name them.
const (
	StrategyNone        = "none"
	StrategyTimeSlicing = "time-slicing"
)

// MaxReplicas bounds replicas: beyond it the kubelet would track thousands
// of fictitious devices per node for no scheduling gain.
const MaxReplicas = 64

// MaxConfigSize bounds a configuration file (a ConfigMap holds at most 1 MiB).
const MaxConfigSize = 1 << 20

// SharedSuffix is what renameByDefault appends to the resource name.
const SharedSuffix = ".shared"

// Config is how the plugin's XPUs are shared.
type Config struct {
	// Replicas is how many times each XPU is advertised; 1 means no sharing.
	Replicas int
	// ResourceName is the extended resource advertised: the plugin's own, or
	// its shared name (renameByDefault, rename) when replicas > 1.
	ResourceName string
	// FailRequestsGreaterThanOne refuses a container asking for more than
	// one replica (it would get time on one XPU, not more compute).
	FailRequestsGreaterThanOne bool
}

// None is no sharing of resource.
func None(resource string) Config { return Config{Replicas: 1, ResourceName: resource} }

// Strategy is StrategyTimeSlicing when XPUs are advertised more than once.
func (c Config) Strategy() string {
	if c.Replicas > 1 {
		return StrategyTimeSlicing
	}
	return StrategyNone
}

// Shared reports whether each XPU is advertised more than once.
func (c Config) Shared() bool { return c.Replicas > 1 }

// Flags are the command-line form of the common case.
type Flags struct {
	Replicas                   int
	RenameByDefault            bool
	FailRequestsGreaterThanOne bool
}

// FromFlags returns the configuration of resource that f describes.
func FromFlags(resource string, f Flags) (Config, error) {
	p, err := PolicyFromFlags(resource, f)
	if err != nil {
		return Config{}, err
	}
	return p.For(resource), nil
}

// Load reads the configuration file path for the plugin's resource.
func Load(path, resource string) (Config, error) {
	p, err := LoadPolicy(path, resource)
	if err != nil {
		return Config{}, err
	}
	return p.For(resource), nil
}

// LoadPolicy reads the configuration file path for the plugin's resource
// and its partition sizes.
func LoadPolicy(path, resource string) (Policy, error) {
	// A ConfigMap's file is a symlink (..data/name): followed, but what it
	// leads to must be a regular file on an ordinary file system, read
	// without blocking (fdio): a FIFO or a link to /dev/zero is an error.
	data, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, 0, MaxConfigSize)
	if err != nil {
		return Policy{}, fmt.Errorf("reading the sharing configuration: %w", err)
	}
	p, err := ParsePolicy(data, resource)
	if err != nil {
		return Policy{}, fmt.Errorf("sharing configuration %s: %w", path, err)
	}
	return p, nil
}

// ErrUnsupported marks a key of NVIDIA's configuration that this plugin
// knows but does not implement.
var ErrUnsupported = errors.New("not supported by xpu-device-plugin")

// file is NVIDIA's configuration, as far as sharing goes.
type file struct {
	Version string `yaml:"version"`
	Sharing struct {
		TimeSlicing struct {
			RenameByDefault            bool       `yaml:"renameByDefault"`
			FailRequestsGreaterThanOne bool       `yaml:"failRequestsGreaterThanOne"`
			Resources                  []resource `yaml:"resources"`
		} `yaml:"timeSlicing"`
	} `yaml:"sharing"`
}

type resource struct {
	Name     string    `yaml:"name"`
	Rename   string    `yaml:"rename"`
	Replicas yaml.Node `yaml:"replicas"`
	Devices  yaml.Node `yaml:"devices"`
}

// keys lists the keys allowed in each mapping, by path ("" is the top).
// "[]" stands for any list index.
var keys = map[string][]string{
	"":                                {"version", "sharing"},
	"sharing":                         {"timeSlicing"},
	"sharing.timeSlicing":             {"renameByDefault", "failRequestsGreaterThanOne", "resources"},
	"sharing.timeSlicing.resources[]": {"name", "rename", "replicas", "devices"},
}

// unsupported are keys of NVIDIA's configuration this plugin refuses with
// a reason rather than as unknown.
var unsupported = map[string]string{
	"flags":       "give the plugin's settings as its command-line flags or XPU_CDI_* variables",
	"sharing.mps": "Kunlun has no MPS; use sharing.timeSlicing",
	"imex":        "Kunlun has no IMEX channels",
}

// Parse decodes a configuration for the plugin's resource.
func Parse(data []byte, resourceName string) (Config, error) {
	p, err := ParsePolicy(data, resourceName)
	if err != nil {
		return Config{}, err
	}
	return p.For(resourceName), nil
}

// ParsePolicy decodes a configuration for the plugin's resource
// resourceName and its partition sizes (resourceName-48gb ...).
func ParsePolicy(data []byte, resourceName string) (Policy, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return Policy{}, errors.New("the file is empty: give at least version: v1")
		}
		return Policy{}, fmt.Errorf("not YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Policy{}, errors.New("more than one YAML document: give one")
	}
	if err := checkKeys(&root, ""); err != nil {
		return Policy{}, err
	}
	var f file
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Policy{}, fmt.Errorf("decoding: %w", err)
	}
	if f.Version != "v1" {
		return Policy{}, fmt.Errorf("version %q: only v1 is known (write version: v1)", f.Version)
	}
	ts := f.Sharing.TimeSlicing
	p := Policy{
		base: resourceName, renameByDefault: ts.RenameByDefault,
		failGreaterThanOne: ts.FailRequestsGreaterThanOne, named: map[string]share{},
	}
	for i, r := range ts.Resources {
		at := fmt.Sprintf("sharing.timeSlicing.resources[%d]", i)
		if r.Name != resourceName && !names.IsPartitionResource(resourceName, r.Name) {
			return Policy{}, fmt.Errorf("%s.name %q is not this plugin's resource %s nor one of its partition sizes (%s-48gb, %s-24gb ...; set --resource-name to advertise another name)",
				at, r.Name, resourceName, resourceName, resourceName)
		}
		if _, ok := p.named[r.Name]; ok {
			return Policy{}, fmt.Errorf("%s.name: %s is named twice; give one entry", at, r.Name)
		}
		n, err := replicasOf(&r.Replicas)
		if err != nil {
			return Policy{}, fmt.Errorf("%s.replicas: %w", at, err)
		}
		if err := devicesOf(&r.Devices); err != nil {
			return Policy{}, fmt.Errorf("%s.devices: %w", at, err)
		}
		p.named[r.Name] = share{replicas: n, rename: r.Rename}
	}
	if err := p.checkRenames(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// checkKeys refuses a key of n (at path) that the configuration does not
// have, naming its full path and line.
func checkKeys(n *yaml.Node, path string) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := checkKeys(c, path); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := checkKeys(c, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		allowed, ok := keys[pattern(path)]
		if !ok {
			return nil // a value (replicas, devices): typed decoding checks it
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			full := k
			if path != "" {
				full = path + "." + k
			}
			if why, ok := unsupported[full]; ok {
				return fmt.Errorf("line %d: %s is %w: %s", n.Content[i].Line, full, ErrUnsupported, why)
			}
			if !slices.Contains(allowed, k) {
				return fmt.Errorf("line %d: unknown key %s (known here: %s)", n.Content[i].Line, full, strings.Join(allowed, ", "))
			}
			if err := checkKeys(n.Content[i+1], full); err != nil {
				return err
			}
		}
	}
	return nil
}

// pattern replaces the list indices of path by "[]".
func pattern(path string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(path, '[')
		if open < 0 {
			b.WriteString(path)
			return b.String()
		}
		end := strings.IndexByte(path[open:], ']')
		if end < 0 {
			b.WriteString(path)
			return b.String()
		}
		b.WriteString(path[:open] + "[]")
		path = path[open+end+1:]
	}
}

func replicasOf(n *yaml.Node) (int, error) {
	if n.Kind == 0 {
		return 0, errors.New("missing: give how many times each XPU is advertised (at least 1)")
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, fmt.Errorf("line %d: %q is not a whole number", n.Line, n.Value)
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0, fmt.Errorf("line %d: %q is not a whole number", n.Line, n.Value)
	}
	if err := checkReplicas(v); err != nil {
		return 0, fmt.Errorf("line %d: %w", n.Line, err)
	}
	return v, nil
}

func checkReplicas(n int) error {
	switch {
	case n < 1:
		return fmt.Errorf("%d replicas: give at least 1 (1 means no sharing)", n)
	case n > MaxReplicas:
		return fmt.Errorf("%d replicas: give at most %d", n, MaxReplicas)
	}
	return nil
}

// devicesOf accepts what NVIDIA's default is (all devices) and refuses a
// selection: every XPU of the node is shared alike.
func devicesOf(n *yaml.Node) error {
	if n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Value == "all") {
		return nil
	}
	return fmt.Errorf("line %d: a selection of devices is %w: every XPU of the node is shared alike (remove the key or write devices: all)", n.Line, ErrUnsupported)
}
