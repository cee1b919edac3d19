package xpunode

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSpecHint(t *testing.T) {
	require.Equal(t, "xpu-cdi generate --output /var/run/cdi/baidu.com-xpu.yaml", SpecHint("baidu.com/xpu"))
	require.Equal(t, "xpu-cdi generate --vendor example.com --class gpu --output /var/run/cdi/example.com-gpu.yaml", SpecHint("example.com/gpu"))
}
