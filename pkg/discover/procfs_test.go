package discover

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseProcInfo(t *testing.T) {
	for _, tc := range []struct {
		description string
		data        string
		want        procInfo
		wantErr     string
	}{
		{
			description: "Kunlun2: key, colon, TAB, value",
			data:        "DeviceName:\tKunlun2\nDeviceAddr:\t0000:01:00.0\nDeviceSN:\t02K00Y6217V00009\nDriverVersion:\t4.33.0\n",
			want:        procInfo{DeviceName: "Kunlun2", DeviceAddr: "0000:01:00.0", DeviceSN: "02K00Y6217V00009", DriverVersion: "4.33.0"},
		},
		{
			description: "Kunlun1: one space, firmware and CPLD, CPLD padded",
			data:        "DeviceName: K200\nDeviceAddr: 0000:3b:00.0\nDeviceSN: 22f\nFirmwareVersion: 0001.0000.0020\nCPLDVersion:     21\nDriverVersion: 4.33.0\n",
			want:        procInfo{DeviceName: "K200", DeviceAddr: "0000:3b:00.0", DeviceSN: "22f", FirmwareVersion: "0001.0000.0020", CPLDVersion: "21", DriverVersion: "4.33.0"},
		},
		{
			description: "unknown keys and lines without a colon are ignored",
			data:        "Garbage line\nNewKey:\tvalue\nDeviceName:\tKunlun3\n",
			want:        procInfo{DeviceName: "Kunlun3"},
		},
		{
			description: "the value may contain colons (PCI address)",
			data:        "DeviceAddr: 0000:81:00.0\r\n",
			want:        procInfo{DeviceAddr: "0000:81:00.0"},
		},
		{description: "empty", data: "", wantErr: "no known key"},
		{description: "no known key", data: "Foo: bar\n", wantErr: "no known key"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got, err := parseProcInfo([]byte(tc.data))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseProcInfo(f *testing.F) {
	f.Add([]byte("DeviceName:\tKunlun2\nDeviceAddr:\t0000:01:00.0\n"))
	f.Add([]byte("DeviceName: K200\nCPLDVersion:     21\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := parseProcInfo(data)
		if err != nil {
			return
		}
		for _, v := range []string{info.DeviceName, info.DeviceAddr, info.DeviceSN, info.DriverVersion} {
			require.NotContains(t, v, "\n")
		}
	})
}

func TestParseNodeName(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		ok   bool
	}{
		{"xpu0", 0, true},
		{"xpu15", 15, true},
		{"xpuctrl", 0, false},
		{"xpu", 0, false},
		{"xpu01", 0, false},
		{"xpu-1", 0, false},
		{"xpu1a", 0, false},
		{"gpu0", 0, false},
		{"xpu99999999999999999999", 0, false},
	} {
		n, ok := ParseNodeName(tc.name)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.n, n, tc.name)
		// The container path of the same node.
		n, ok = ParseNodePath("/dev/" + tc.name)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.n, n, tc.name)
	}
	for _, p := range []string{"xpu0", "/dev/xpu0/", "/dev//xpu0", "/host/dev/xpu0", "/dev/dri/xpu0"} {
		_, ok := ParseNodePath(p)
		require.False(t, ok, p)
	}
}

func TestParseIndex(t *testing.T) {
	for s, want := range map[string]int{"0": 0, "7": 7, "1048576": MaxIndex} {
		n, ok := ParseIndex(s)
		require.True(t, ok, s)
		require.Equal(t, want, n, s)
	}
	for _, s := range []string{"", "01", "+1", "-1", " 1", "1 ", "0x1", "1048577", "99999999999999999999"} {
		_, ok := ParseIndex(s)
		require.False(t, ok, s)
	}
}

func TestJoinIndices(t *testing.T) {
	require.Equal(t, "", JoinIndices(nil))
	require.Equal(t, "3", JoinIndices([]int{3}))
	require.Equal(t, "0,2,10", JoinIndices([]int{0, 2, 10}))
}

func TestModelFor(t *testing.T) {
	pf := func(dev, sv, sd uint16) *PCI {
		return &PCI{VendorID: vendorKunlun, DeviceID: dev, SubsystemVendor: sv, SubsystemDevice: sd}
	}
	require.Equal(t, "R200", modelFor(pf(0x3684, 2, 1), "Kunlun2", ""))
	require.Equal(t, "RG800-PRO", modelFor(pf(0x3684, 2, 8), "Kunlun2", ""))
	require.Equal(t, ModelUnknown, modelFor(pf(0x3684, 2, 99), "Kunlun2", ""))
	require.Equal(t, "K200", modelFor(pf(0x3684, 0, 0), "K200", ""))
	require.Equal(t, ModelUnknown, modelFor(pf(0x3684, 0, 0), "", ""))
	require.Equal(t, "R200 VF", modelFor(pf(0x3685, 2, 1), "Kunlun2", "R200"))
	require.Equal(t, "Kunlun2 VF", modelFor(pf(0x3685, 2, 1), "Kunlun2", ""))
	require.Equal(t, "P800", modelFor(pf(0x3688, 0, 0), "Kunlun3", ""))
	require.Equal(t, ModelUnknown, modelFor(pf(0x3699, 0, 0), "", ""), "an unknown Kunlun ID is not an error")
	require.Equal(t, ModelUnknown, modelFor(&PCI{VendorID: 0x10de}, "", ""))
	require.Equal(t, "K100", modelFor(nil, "K100", ""))
}

func TestIsPCIAddress(t *testing.T) {
	for s, want := range map[string]bool{
		"0000:3b:00.0": true, "ffff:ff:1f.7": true, "0000:3B:00.0": false, "0000:3b:00.8": false,
		"0000:3b:00": false, "000:3b:00.0": false, "0000-3b:00.0": false, "0000:3b:00.00": false,
		"0000:3g:00.0": false, "": false,
	} {
		require.Equal(t, want, IsPCIAddress(s), s)
	}
}
