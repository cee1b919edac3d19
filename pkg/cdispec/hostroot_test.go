package cdispec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHostPath(t *testing.T) {
	for _, tc := range []struct {
		root, p, want, err string
	}{
		{"/host", "/host/dev/xpu0", "/dev/xpu0", ""},
		{"/host/", "/host/usr/local/xpu-5.0.21.47/so/libxpurt.so.2", "/usr/local/xpu-5.0.21.47/so/libxpurt.so.2", ""},
		{"/host", "/host", "/", ""},
		{"/", "/dev/xpu0", "/dev/xpu0", ""},
		{"", "/dev/xpu0", "/dev/xpu0", ""},
		{"/host", "/hostile/dev/xpu0", "", "/hostile/dev/xpu0 is not below the host root /host"},
		{"/host", "/dev/xpu0", "", "is not below the host root"},
		{"/host", "/host/../etc/passwd", "", "is not below the host root"},
		{"/host", "dev/xpu0", "", "is not below the host root"},
	} {
		t.Run(tc.root+" "+tc.p, func(t *testing.T) {
			got, err := HostPath(tc.root, tc.p)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
