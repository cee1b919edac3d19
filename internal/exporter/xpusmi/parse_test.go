package xpusmi

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mLine is a line of the public layout: 32 fields.
func mLine(idx, temp, power, used, total, util string) string {
	f := strings.Fields("xpu 0 0 0 0 C 0 0 0 W 0 0 0 0 0 0 0 0 0 0 % (P800 OAM) 0 0 0 0 0 0 0 0 0")
	f[1], f[4], f[8], f[17], f[18], f[19] = idx, temp, power, used, total, util
	return strings.Join(f, "  ")
}

func TestParseM(t *testing.T) {
	good := mLine("0", "45", "80.5", "1024", "98304", "37")
	for _, tc := range []struct {
		description string
		out         string
		want        []Sample
		errs        []string
	}{
		{
			description: "public layout",
			out:         good + "\n" + mLine("1", "38", "61", "0", "49152", "0") + "\n",
			want: []Sample{
				{Index: 0, Temperature: 45, Power: 80.5, MemoryUsed: 1024 << 20, MemoryTotal: 98304 << 20, Utilization: 0.37, Name: "P800 OAM"},
				{Index: 1, Temperature: 38, Power: 61, MemoryUsed: 0, MemoryTotal: 49152 << 20, Utilization: 0, Name: "P800 OAM"},
			},
		},
		{description: "empty output", out: ""},
		{description: "blank lines are skipped", out: "\n\n" + good + "\n\n", want: []Sample{{Index: 0, Temperature: 45, Power: 80.5, MemoryUsed: 1024 << 20, MemoryTotal: 98304 << 20, Utilization: 0.37, Name: "P800 OAM"}}},
		{description: "short line", out: good[:len(good)-3], errs: []string{"line 1: 31 fields, not 32"}},
		{description: "long line", out: good + " extra", errs: []string{"line 1: 33 fields, not 32"}},
		{description: "a one-word name shifts the fields", out: strings.Replace(good, "(P800  OAM)", "(R200)", 1), errs: []string{"31 fields"}},
		{
			description: "bad line among good ones", out: good + "\nxpu-smi: driver not loaded\n" + mLine("2", "1", "1", "1", "2", "3"), errs: []string{"line 2: 4 fields"},
			want: []Sample{{Index: 0, Temperature: 45, Power: 80.5, MemoryUsed: 1024 << 20, MemoryTotal: 98304 << 20, Utilization: 0.37, Name: "P800 OAM"}, {Index: 2, Temperature: 1, Power: 1, MemoryUsed: 1 << 20, MemoryTotal: 2 << 20, Utilization: 0.03, Name: "P800 OAM"}},
		},
		{description: "index not a number", out: mLine("x", "45", "80", "1", "2", "3"), errs: []string{"field 1 (xpu-smi index)"}},
		{description: "negative index", out: mLine("-1", "45", "80", "1", "2", "3"), errs: []string{"field 1"}},
		{description: "temperature N/A", out: mLine("0", "N/A", "80", "1", "2", "3"), errs: []string{"field 4 (temperature)"}},
		{description: "NaN power", out: mLine("0", "4", "NaN", "1", "2", "3"), errs: []string{"field 8 (power)"}},
		{description: "utilisation over 100", out: mLine("0", "4", "8", "1", "2", "300"), errs: []string{"field 19 (utilisation)"}},
		{description: "used over total", out: mLine("0", "4", "8", "3", "2", "3"), errs: []string{"more than the total"}},
		{description: "no parentheses", out: strings.Replace(good, "(P800  OAM)", "P800 OAM", 1), errs: []string{"not a name in parentheses"}},
		{
			description: "index twice", out: good + "\n" + good, errs: []string{"line 2: xpu-smi index 0 given twice"},
			want: []Sample{{Index: 0, Temperature: 45, Power: 80.5, MemoryUsed: 1024 << 20, MemoryTotal: 98304 << 20, Utilization: 0.37, Name: "P800 OAM"}},
		},
		{description: "garbage", out: "\x00\xff\xfe garbage\n+----+----+\n| XPU | Name |", errs: []string{"line 1", "line 2", "line 3"}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got, errs := ParseM([]byte(tc.out))
			require.Equal(t, tc.want, got)
			require.Len(t, errs, len(tc.errs))
			for i, e := range tc.errs {
				require.ErrorContains(t, errs[i], e)
				var le *LineError
				require.ErrorAs(t, errs[i], &le)
			}
		})
	}
}

func TestParseMQuotesLongLinesBounded(t *testing.T) {
	_, errs := ParseM([]byte(strings.Repeat("x ", 10000)))
	require.Len(t, errs, 1)
	require.Less(t, len(errs[0].Error()), 300)
}

func TestParseQ(t *testing.T) {
	head := "==============XPU-SMI LOG==============\nDriver Version : 5.0.21.47\nXPU 00000000:03:00.0\n    Product Name : P800 OAM\n"
	for _, tc := range []struct {
		description string
		out         string
		want        string
		err         string
	}{
		{description: "kernel form", out: head + "    Bus Id                  : 0000:03:00.0\n    Memory Usage\n        Total : 98304 MiB\n", want: "0000:03:00.0"},
		{description: "eight-digit domain, upper case", out: head + "    Bus Id : 00000000:3B:00.1\n", want: "0000:3b:00.1"},
		{description: "no domain", out: "Bus Id : 03:00.0\n", want: "0000:03:00.0"},
		{description: "no Bus Id", out: head, err: "no Bus Id line"},
		{description: "two devices", out: "Bus Id : 0000:03:00.0\nBus Id : 0000:04:00.0\n", err: "line 2: a second Bus Id line"},
		{description: "not an address", out: "Bus Id : N/A\n", err: `line 1: Bus Id "N/A" is not a PCI address`},
		{description: "garbage", out: "\x00\x01\xff:::\n", err: "no Bus Id line"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got, err := ParseQ([]byte(tc.out))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got.BusID)
		})
	}
}

// Every whole percentage is the ratio written with two decimals, without
// float noise (57 % is 0.57, not 57 * 0.01 = 0.5700000000000001), and a
// whole number of MiB is a whole number of bytes.
func TestParseMNoFloatNoise(t *testing.T) {
	for pct := range 101 {
		samples, errs := ParseM([]byte(mLine("0", "45", "80", "1", "3", strconv.Itoa(pct))))
		require.Empty(t, errs)
		require.Len(t, samples, 1)
		want := strings.TrimRight(strings.TrimRight(fmt.Sprintf("%d.%02d", pct/100, pct%100), "0"), ".")
		require.Equal(t, want, strconv.FormatFloat(samples[0].Utilization, 'g', -1, 64), "%d %%", pct)
		require.Equal(t, "3145728", strconv.FormatFloat(samples[0].MemoryTotal, 'f', -1, 64))
	}
}

// -q's Serial Number and Driver Version are taken when plausible: N/A, a
// value that is not printable ASCII or is too long is left out.
func TestParseQFacts(t *testing.T) {
	for _, tc := range []struct {
		description, out, serial, driver string
	}{
		{"both", "Driver Version : 5.0.21.47\nXPU 03:00.0\n    Serial Number : 02K00Y6217V00009\n    Bus Id : 0000:03:00.0\n", "02K00Y6217V00009", "5.0.21.47"},
		{"none printed", "Bus Id : 0000:03:00.0\n", "", ""},
		{"N/A", "Driver Version : N/A\nSerial Number : n/a\nBus Id : 0000:03:00.0\n", "", ""},
		{"not printable", "Serial Number : SN\x01\xff\nBus Id : 0000:03:00.0\n", "", ""},
		{"too long", "Serial Number : " + strings.Repeat("9", 65) + "\nBus Id : 0000:03:00.0\n", "", ""},
		{"the first of each", "Driver Version : 4.33.0\nDriver Version : 9\nSerial Number : A1\nSerial Number : B2\nBus Id : 0000:03:00.0\n", "A1", "4.33.0"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			d, err := ParseQ([]byte(tc.out))
			require.NoError(t, err)
			require.Equal(t, Detail{BusID: "0000:03:00.0", Serial: tc.serial, DriverVersion: tc.driver}, d)
		})
	}
}
