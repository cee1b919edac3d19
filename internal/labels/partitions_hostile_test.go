package labels

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Whatever a host's sysfs says of a PF's VFs (a huge, negative, overflowing
// or non-numeric sriov_numvfs or sriov_totalvfs), the partition labels are
// valid label keys and values, or left out.
func TestPartitionLabelsHostileSysfs(t *testing.T) {
	for _, v := range []string{"2147483647", "9223372036854775807", "-3", "99999999999999999999999", "4x", "\x1b[2J", ""} {
		for _, attr := range []string{"sriov_numvfs", "sriov_totalvfs"} {
			tree := fakehosttest.Build(t, fakehost.P800SRIOV())
			for _, pf := range []string{"0000:03:00.0", "0000:83:00.0"} {
				dir, err := filepath.EvalSymlinks(tree.Path("/sys/bus/pci/devices/" + pf))
				require.NoError(t, err)
				// Tree.WriteFile: the kernel's files are 0444, and the unit
				// tests also run as an ordinary user.
				require.NoError(t, tree.WriteFile(strings.TrimPrefix(filepath.Join(dir, attr), tree.Root), []byte(v+"\n")))
			}
			h, err := discover.Discover(tree.DiscoverOptions()...)
			require.NoError(t, err)
			for _, l := range For(h, "", nil) {
				require.Empty(t, validation.IsQualifiedName(l.Key), "%s=%q: %s", attr, v, l.Key)
				require.Empty(t, validation.IsValidLabelValue(l.Value), "%s=%q: %s=%q", attr, v, l.Key, l.Value)
			}
		}
	}
}
