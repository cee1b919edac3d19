package shim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
)

func TestRequestedIndices(t *testing.T) {
	for _, tc := range []struct {
		description string
		names       []string
		want        []int
		ok          bool
	}{
		{description: "one index", names: []string{"baidu.com/xpu=0"}, want: []int{0}, ok: true},
		{description: "indices in order, repeats kept", names: []string{"baidu.com/xpu=7", "baidu.com/xpu=1", "baidu.com/xpu=7"}, want: []int{7, 1, 7}, ok: true},
		{description: "largest node index", names: []string{"baidu.com/xpu=1048576"}, want: []int{1 << 20}, ok: true},
		{description: "nothing asked", names: nil},
		{description: "all", names: []string{"baidu.com/xpu=0", "baidu.com/xpu=all"}},
		{description: "PCI address", names: []string{"baidu.com/xpu=0000:01:00.0"}},
		{description: "serial of digits only is still an index name", names: []string{"baidu.com/xpu=12"}, want: []int{12}, ok: true},
		{description: "serial", names: []string{"baidu.com/xpu=02P00A5240V00101"}},
		{description: "leading zero is not the spec's index name", names: []string{"baidu.com/xpu=01"}},
		{description: "sign", names: []string{"baidu.com/xpu=+1"}},
		{description: "negative", names: []string{"baidu.com/xpu=-1"}},
		{description: "beyond any node name", names: []string{"baidu.com/xpu=1048577"}},
		{description: "another kind", names: []string{"example.com/xpu=0"}},
		{description: "kind without name", names: []string{"baidu.com/xpu="}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got, ok := requestedIndices("baidu.com/xpu", tc.names)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestJITNarrowFallsBack checks, without root, the two paths of an index
// request in jit mode: resolved from the requested devices alone, or,
// when one of them is not a compute device, from the whole host, whose
// error names every valid device.
func TestJITNarrowFallsBack(t *testing.T) {
	tree, seam := fakeHost(t, fakehost.R200SRIOV())
	for _, tc := range []struct {
		description string
		env         string
		wantErr     string
		devices     []int
	}{
		{description: "a VF", env: "XPU_VISIBLE_DEVICES=3", devices: []int{3}},
		{description: "a PF without VFs and a VF", env: "XPU_VISIBLE_DEVICES=4,1", devices: []int{1, 4}},
		{
			description: "the PF with VFs enabled",
			env:         "XPU_VISIBLE_DEVICES=2,0",
			wantErr:     "unknown XPU device baidu.com/xpu=0 (asked for by XPU_VISIBLE_DEVICES=2,0); valid names of baidu.com/xpu (jit mode): 1, 2, 3, 4, 0000:3b:00.1, 0000:3b:00.2, 0000:3b:00.3, 0000:5e:00.0, 02K00Y6217V00010, all",
		},
		{description: "no such node", env: "XPU_VISIBLE_DEVICES=5", wantErr: "unknown XPU device baidu.com/xpu=5 (asked for by XPU_VISIBLE_DEVICES=5); valid names of baidu.com/xpu (jit mode): 1, 2, 3, 4, 0000:3b:00.1, 0000:3b:00.2, 0000:3b:00.3, 0000:5e:00.0, 02K00Y6217V00010, all"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir, _ := writeBundle(t, bundleSpec(true, nil, tc.env))
			log := &logtest.Recorder{}
			res, err := ModifyBundle(dir, jitConfig(tree.Root), seam.logTo(log))
			if tc.wantErr != "" {
				require.ErrorIs(t, err, errUnknownDevice)
				require.EqualError(t, err, tc.wantErr)
				require.True(t, log.Has("discovering the whole host"), log.Lines())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.devices, res.Devices)
			require.True(t, log.Has("jit mode: discovered XPUs "+tc.env[len("XPU_VISIBLE_DEVICES="):]+" only"), log.Lines())
			require.False(t, log.Has("discovering the whole host"), log.Lines())
		})
	}
}
