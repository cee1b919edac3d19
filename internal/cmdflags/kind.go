package cmdflags

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// Kind is the group of the CDI kind's flags, --vendor and --class
// (default baidu.com/xpu).
type Kind struct {
	Vendor string
	Class  string
}

// Flags returns --vendor and --class bound to k; of ends their usage
// ("of the names Prepare answers").
func (k *Kind) Flags(of string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "vendor", Usage: "vendor part of the CDI kind " + of, Value: cdispec.DefaultVendor, EnvVars: []string{"XPU_CDI_VENDOR"}, Destination: &k.Vendor},
		&cli.StringFlag{Name: "class", Usage: "class part of the CDI kind " + of, Value: cdispec.DefaultClass, EnvVars: []string{"XPU_CDI_CLASS"}, Destination: &k.Class},
	}
}

// Validate checks the kind as the CDI parser does.
func (k *Kind) Validate() error {
	if err := cdispec.ValidateKind(k.Vendor, k.Class); err != nil {
		return fmt.Errorf("--vendor/--class: %w", err)
	}
	return nil
}

// String is the kind, vendor/class.
func (k *Kind) String() string { return cdispec.Kind(k.Vendor, k.Class) }
