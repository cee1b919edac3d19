package cmdflags

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// The defaults of the kubelet-side flags that are not names (those are in
// package names).
const (
	// DefaultPollInterval is how often a daemon reads the devices' state
	// and the CDI specs again (--poll-interval).
	DefaultPollInterval = 10 * time.Second
	// DevicePluginHealthAddress and DRADriverHealthAddress are the
	// --health-address of xpu-device-plugin and xpu-dra-driver: two
	// ports, since both may run on one node in its network namespace
	// (the chart's probes use them).
	DevicePluginHealthAddress = ":9508"
	DRADriverHealthAddress    = ":9509"
)

// Kubelet is the group of the kubelet-side flags, each defined, defaulted
// and checked here once: the device plugin's resource (--resource-name),
// the DRA driver's name (--dra-driver-name), the kubelet's PodResources
// socket (--pod-resources-socket), a daemon's health endpoint
// (--health-address) and how often a daemon reads the node again
// (--poll-interval). A command takes the flags it has; each flag's usage
// says what that command does with it.
type Kubelet struct {
	ResourceName       string
	DRADriverName      string
	PodResourcesSocket string
	HealthAddress      string
	PollInterval       time.Duration

	// deprecated records the deprecated names the command line or the
	// environment used, for WarnDeprecated.
	deprecated []string
}

// ResourceNameFlag is --resource-name (default names.ResourceName): the
// device plugin's extended resource; usage says what the command does
// with it.
func (k *Kubelet) ResourceNameFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "resource-name", Usage: usage, Value: names.ResourceName, EnvVars: []string{"XPU_CDI_RESOURCE_NAME"}, Destination: &k.ResourceName}
}

// DRADriverNameFlag is --dra-driver-name (default names.DRADriver).
// deprecatedAliases are older names of the flag that still work, with a
// warning (WarnDeprecated).
func (k *Kubelet) DRADriverNameFlag(usage string, deprecatedAliases ...string) cli.Flag {
	return &deprecatedStringFlag{
		StringFlag: &cli.StringFlag{Name: "dra-driver-name", Aliases: deprecatedAliases, Usage: usage, Value: names.DRADriver, EnvVars: []string{"XPU_CDI_DRA_DRIVER_NAME"}, Destination: &k.DRADriverName},
		deprecated: deprecatedNames{aliases: deprecatedAliases, used: &k.deprecated},
	}
}

// PodResourcesSocketFlag is --pod-resources-socket (default
// names.PodResourcesSocket, below --host-root when the command has it:
// ApplyHostRoot); "" asks no kubelet.
func (k *Kubelet) PodResourcesSocketFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: podResourcesSocketFlag, Usage: usage, Value: names.PodResourcesSocket, EnvVars: []string{"XPU_CDI_POD_RESOURCES_SOCKET"}, Destination: &k.PodResourcesSocket}
}

const podResourcesSocketFlag = "pod-resources-socket"

// PodResourcesSocketSet reports whether --pod-resources-socket was given
// (flag or variable) rather than defaulted.
func (k *Kubelet) PodResourcesSocketSet(c *cli.Context) bool { return c.IsSet(podResourcesSocketFlag) }

// ApplyHostRoot moves the default PodResources socket below hostRoot, where
// the host's kubelet has it when the host's / is mounted there; a socket
// given by flag or variable is taken as it is.
func (k *Kubelet) ApplyHostRoot(c *cli.Context, hostRoot string) {
	if hostRoot != "" && !c.IsSet(podResourcesSocketFlag) {
		k.PodResourcesSocket = filepath.Join(hostRoot, names.PodResourcesSocket)
	}
}

// HealthAddressFlag is --health-address with the daemon's default
// (DevicePluginHealthAddress, DRADriverHealthAddress).
func (k *Kubelet) HealthAddressFlag(defaultAddr string) cli.Flag {
	return &cli.StringFlag{
		Name:        HealthAddress,
		Usage:       "`HOST:PORT` of the health endpoint: GET /healthz (liveness), /readyz (readiness, with the reason when not ready), plain text, and /metrics (Prometheus metrics); empty turns it off",
		Value:       defaultAddr,
		EnvVars:     []string{"XPU_CDI_HEALTH_ADDRESS"},
		Destination: &k.HealthAddress,
	}
}

// HealthAddress is the name of the health endpoint's flag, for errors.
const HealthAddress = "health-address"

// PollIntervalFlag is --poll-interval (default DefaultPollInterval). The
// device plugin's old name of the setting, --health-check-interval
// (XPU_CDI_HEALTH_CHECK_INTERVAL), still works, with a warning
// (WarnDeprecated).
func (k *Kubelet) PollIntervalFlag() cli.Flag {
	return &deprecatedDurationFlag{
		DurationFlag: &cli.DurationFlag{
			Name: "poll-interval", Aliases: []string{"health-check-interval"}, Usage: "how often the devices' state and the CDI specs are read again",
			Value: DefaultPollInterval, EnvVars: []string{"XPU_CDI_POLL_INTERVAL", "XPU_CDI_HEALTH_CHECK_INTERVAL"}, Destination: &k.PollInterval,
		},
		deprecated: deprecatedNames{aliases: []string{"health-check-interval"}, env: []string{"XPU_CDI_HEALTH_CHECK_INTERVAL"}, used: &k.deprecated},
	}
}

// ValidatePollInterval refuses a poll interval below 100ms, which would
// keep a core busy reading sysfs.
func (k *Kubelet) ValidatePollInterval() error {
	if k.PollInterval < 100*time.Millisecond {
		return fmt.Errorf("--poll-interval %s is too short: give at least 100ms (e.g. 10s)", k.PollInterval)
	}
	return nil
}

// WarnDeprecated logs a warning for each deprecated flag name or variable
// the command was given, naming the one to use instead.
func (k *Kubelet) WarnDeprecated(log logger.Interface) {
	seen := map[string]bool{}
	for _, w := range k.deprecated {
		if !seen[w] {
			seen[w] = true
			log.Warnf("%s", w)
		}
	}
}

// deprecatedNames are a flag's deprecated aliases and variables, and where
// their use is recorded. urfave/cli binds every alias to the same
// destination and reports the flag set whichever name set it, so the
// aliases' flag.Values are wrapped to tell them apart.
type deprecatedNames struct {
	aliases []string
	env     []string
	used    *[]string
}

// apply wraps the aliases of name in set and records a deprecated
// variable that gives the flag its value (vars in urfave/cli's order: the
// first one set wins).
func (d deprecatedNames) apply(set *flag.FlagSet, name string, vars []string) {
	for _, a := range d.aliases {
		if fl := set.Lookup(a); fl != nil {
			fl.Value = &recordingValue{Value: fl.Value, set: set, primary: name, used: d.used, note: fmt.Sprintf("--%s is deprecated: use --%s", a, name)}
		}
	}
	for _, v := range vars {
		if _, set := os.LookupEnv(v); set {
			if slices.Contains(d.env, v) {
				*d.used = append(*d.used, fmt.Sprintf("%s is deprecated: use %s (--%s)", v, vars[0], name))
			}
			return
		}
	}
}

// deprecatedStringFlag and deprecatedDurationFlag are flags with
// deprecated names: every method but Apply is the embedded flag's, so
// help and the documentation show them as any other.
type deprecatedStringFlag struct {
	*cli.StringFlag
	deprecated deprecatedNames
}

func (f *deprecatedStringFlag) Apply(set *flag.FlagSet) error {
	if err := f.StringFlag.Apply(set); err != nil {
		return err
	}
	f.deprecated.apply(set, f.Name, f.EnvVars)
	return nil
}

type deprecatedDurationFlag struct {
	*cli.DurationFlag
	deprecated deprecatedNames
}

func (f *deprecatedDurationFlag) Apply(set *flag.FlagSet) error {
	if err := f.DurationFlag.Apply(set); err != nil {
		return err
	}
	f.deprecated.apply(set, f.Name, f.EnvVars)
	return nil
}

// recordingValue is the flag.Value of a deprecated alias: it notes its
// use once. After parsing, urfave/cli copies the value of the name given
// to the flag's other names; a copy from the primary name, set by then,
// is no use of the alias.
type recordingValue struct {
	flag.Value
	set     *flag.FlagSet
	primary string
	used    *[]string
	note    string
	seen    bool
}

func (v *recordingValue) Set(s string) error {
	primarySet := false
	v.set.Visit(func(f *flag.Flag) { primarySet = primarySet || f.Name == v.primary })
	if !v.seen && !primarySet {
		v.seen = true
		*v.used = append(*v.used, v.note)
	}
	return v.Value.Set(s)
}
