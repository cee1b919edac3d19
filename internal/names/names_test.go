package names

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPartitionNames(t *testing.T) {
	for _, tc := range []struct {
		description string
		mib         int64
		size        string
	}{
		{"a half of a P800", 49152, "48gb"},
		{"a quarter of a P800", 24576, "24gb"},
		{"a size not in whole GiB", 1536, "1536mb"},
		{"a small size in whole GiB", 5120, "5gb"},
		{"no size", 0, ""},
		{"a negative size", -1, ""},
	} {
		t.Run(tc.description, func(t *testing.T) {
			require.Equal(t, tc.size, PartitionSizeName(tc.mib))
		})
	}
	require.Equal(t, "1/4", PartitionFraction(4))
	require.Empty(t, PartitionFraction(0))
	require.Equal(t, "baidu.com/xpu-24gb", PartitionResource(ResourceName, 24576))
	require.Equal(t, "kunlunxin.com/xpu-24gb.count", PartitionCountLabel("kunlunxin.com/xpu", "24gb"))
	require.Equal(t, "xpu-7", DRADevice(7))
}

func TestIsPartitionResource(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"baidu.com/xpu-24gb", true},
		{"baidu.com/xpu-5000mb", true},
		{"baidu.com/xpu", false},
		{"baidu.com/xpu-", false},
		{"baidu.com/xpu-024gb", false},
		{"baidu.com/xpu-24gb.shared", false},
		{"baidu.com/xpuother", false},
		{"example.com/xpu-24gb", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, IsPartitionResource(ResourceName, tc.name))
		})
	}
}
