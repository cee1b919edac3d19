package fakehost

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKstrtou16(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"4", 4, true},
		{"4\n", 4, true},
		{"+4", 4, true},
		{"0x4", 4, true},
		{"0X1f", 31, true},
		{"010", 8, true},
		{"0", 0, true},
		{"0\n", 0, true},
		{"65535", 65535, true},
		{"", 0, false},
		{"\n", 0, false},
		{"4\n\n", 0, false},
		{" 4", 0, false},
		{"4 ", 0, false},
		{"-1", 0, false},
		{"08", 0, false},
		{"0x", 0, false},
		{"1_0", 0, false},
		{"65536", 0, false},
		{"four", 0, false},
		{"++4", 0, false},
	} {
		got, ok := kstrtou16(tc.in)
		require.Equal(t, tc.ok, ok, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestVFOf(t *testing.T) {
	pf := p800Device(0, 1, "0000:83:00.0", "pci0000:80/0000:80:02.0")
	vf, err := vfOf(pf, 3, 24576)
	require.NoError(t, err)
	require.Equal(t, "0000:83:00.4", vf.BDF)
	require.Equal(t, FunctionVF, vf.Function)
	require.Equal(t, pf.BDF, vf.PhysFn)
	require.Equal(t, DeviceIDP800, vf.DeviceID, "no P800 VF ID is public")
	require.Equal(t, pf.Serial, vf.Serial)
	require.Equal(t, 1, vf.NUMANode)
	require.Zero(t, vf.TotalVFs)

	pf.BDF = "0000:3b:00.6"
	vf, err = vfOf(pf, 2, 5120)
	require.NoError(t, err)
	require.Equal(t, "0000:3b:01.1", vf.BDF, "past function 7: the next device")

	r200 := r200PF(0, 0, "0000:3b:00.0", 0)
	vf, err = vfOf(r200, 0, 5120)
	require.NoError(t, err)
	require.Equal(t, DeviceIDVF, vf.DeviceID)

	for _, bdf := range []string{"3b:00.0", "0000:3b:00", "0000:3b:20.0"} {
		pf.BDF = bdf
		_, err := vfOf(pf, 0, 1)
		require.ErrorContains(t, err, "DDDD:BB:DD.F", bdf)
	}
	pf.BDF = "0000:3b:1f.7"
	_, err = vfOf(pf, 0, 1)
	require.ErrorContains(t, err, "beyond its bus")
}
