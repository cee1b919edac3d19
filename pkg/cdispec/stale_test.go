package cdispec

import (
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"
	"tags.cncf.io/container-device-interface/specs-go"
)

func TestStaleNodes(t *testing.T) {
	node := func(path string, major, minor int64) *specs.DeviceNode {
		return &specs.DeviceNode{Path: path, Type: "c", Major: major, Minor: minor}
	}
	spec := &specs.Spec{
		ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{node("/dev/xpuctrl", 195, 255)}},
		Devices: []specs.Device{
			{Name: "0", ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{node("/dev/xpu0", 195, 0)}}},
			{Name: "1", ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{node("/dev/xpu1", 195, 1)}}},
			// Another name of XPU 1: its node is checked once.
			{Name: "0000:03:00.0", ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{node("/dev/xpu1", 195, 1)}}},
			{Name: "2", ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{node("/dev/xpu2", 0, 0)}}},
			{Name: "3", ContainerEdits: specs.ContainerEdits{DeviceNodes: []*specs.DeviceNode{node("/dev/xpu3", 195, 3), node("/dev/other", 1, 3)}}},
		},
	}
	type hostNode struct {
		major, minor int64
		err          error
	}
	for _, tc := range []struct {
		description string
		host        map[string]hostNode
		want        []string
	}{
		{
			description: "the host as the spec says",
			host:        map[string]hostNode{"/dev/xpuctrl": {195, 255, nil}, "/dev/xpu0": {195, 0, nil}, "/dev/xpu1": {195, 1, nil}, "/dev/xpu2": {7, 7, nil}, "/dev/xpu3": {195, 3, nil}},
		},
		{
			description: "a driver reload, a gone node, a node that is no character device",
			host: map[string]hostNode{
				"/dev/xpuctrl": {500, 255, nil}, "/dev/xpu0": {195, 0, nil}, "/dev/xpu1": {0, 0, fmt.Errorf("stat: %w", fs.ErrNotExist)},
				"/dev/xpu2": {0, 0, ErrNotCharDevice}, "/dev/xpu3": {500, 3, nil},
			},
			want: []string{
				"spec: /dev/xpuctrl is 500:255 on this host but the spec says 195:255 (stale spec: the driver was reloaded?)",
				"device 1: device node /dev/xpu1: stat: file does not exist",
				"device 2: /dev/xpu2 is not a character device",
				"device 3: /dev/xpu3 is 500:3 on this host but the spec says 195:3 (stale spec: the driver was reloaded?)",
			},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got := StaleNodes(spec, func(n *specs.DeviceNode) (string, int64, int64, error) {
				if n.Path == "/dev/other" {
					return "", 0, 0, nil // not the checker's to check
				}
				h, ok := tc.host[n.Path]
				require.True(t, ok, n.Path)
				return n.Path, h.major, h.minor, h.err
			})
			require.Equal(t, tc.want, got)
		})
	}
}
