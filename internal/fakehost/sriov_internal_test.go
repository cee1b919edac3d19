package fakehost

import (
	"strconv"
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

// WithVFs lays a host out as the kernel's writes would: the VFs at the
// next functions of each PF, the lowest free indices, the table's sizes.
func TestWithVFs(t *testing.T) {
	h := P800x8()
	for i := range h.Devices {
		h.Devices[i].TotalVFs = 4
	}
	cut, err := h.WithVFs(2)
	require.NoError(t, err)
	require.Len(t, h.Devices, 8, "h is not changed")
	require.Len(t, cut.Devices, 24)
	for i, vf := range cut.Devices[8:] {
		pf := h.Devices[i/2]
		require.Equal(t, 8+i, vf.Index)
		require.Equal(t, FunctionVF, vf.Function)
		require.Equal(t, pf.BDF, vf.PhysFn)
		require.Equal(t, pf.BDF[:len(pf.BDF)-1]+strconv.Itoa(1+i%2), vf.BDF)
		require.Equal(t, 49152, vf.MemoryMiB)
		require.Equal(t, slotMinor(8+i), vf.Minor, "driver 4.x layout: the slot's minor")
	}

	_, err = h.WithVFs(5)
	require.ErrorContains(t, err, "sriov_totalvfs 4")
	_, err = cut.WithVFs(2)
	require.ErrorContains(t, err, "has VFs already")
}

// WithCardVFs cuts each card by its own count, and refuses a count list
// that does not name every SR-IOV card or asks more than a card allows.
func TestWithCardVFs(t *testing.T) {
	h := P800x8()
	for i := range h.Devices {
		h.Devices[i].TotalVFs = 4
	}
	cut, err := h.WithCardVFs([]int{0, 2, 4, 0, 0, 0, 0, 4})
	require.NoError(t, err)
	require.Len(t, h.Devices, 8, "h is not changed")
	require.Len(t, cut.Devices, 8+2+4+4)
	perPF := map[string][]Device{}
	for _, d := range cut.Devices[8:] {
		require.Equal(t, FunctionVF, d.Function)
		perPF[d.PhysFn] = append(perPF[d.PhysFn], d)
	}
	require.Len(t, perPF, 3)
	require.Len(t, perPF[h.Devices[1].BDF], 2)
	require.Equal(t, 49152, perPF[h.Devices[1].BDF][0].MemoryMiB)
	require.Len(t, perPF[h.Devices[2].BDF], 4)
	require.Equal(t, 24576, perPF[h.Devices[2].BDF][0].MemoryMiB)
	require.Len(t, perPF[h.Devices[7].BDF], 4)

	_, err = h.WithCardVFs([]int{2, 2})
	require.ErrorContains(t, err, "2 VF counts for 8 SR-IOV cards")
	_, err = h.WithCardVFs([]int{0, 0, 0, 0, 0, 0, 0, 5})
	require.ErrorContains(t, err, "sriov_totalvfs 4")
	_, err = h.WithCardVFs([]int{0, 0, 0, 0, 0, 0, 0, -1})
	require.ErrorContains(t, err, "-1 VFs")
}
