package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const sampleBench = `goos: linux
goarch: amd64
pkg: github.com/xpu-cdi/xpu-cdi/pkg/discover
cpu: AMD EPYC
BenchmarkDiscover/devices=1/libs=10-2         	     139	   1498209 ns/op	  190764 B/op	    2242 allocs/op
BenchmarkDiscover/devices=1/libs=10-2         	     139	   1000000 ns/op	  190764 B/op	    2242 allocs/op
BenchmarkDiscover/devices=1/libs=10-2         	     139	   2000000 ns/op	  190764 B/op	    2242 allocs/op
PASS
ok  	github.com/xpu-cdi/xpu-cdi/pkg/discover	1.651s
pkg: github.com/xpu-cdi/xpu-cdi/pkg/hook
BenchmarkCreateSymlinks 	    5000	    250000 ns/op
`

func TestParseGoBench(t *testing.T) {
	got, err := parseGoBench(strings.NewReader(sampleBench))
	require.NoError(t, err)
	require.Len(t, got, 2)

	d := got[0]
	require.Equal(t, "github.com/xpu-cdi/xpu-cdi/pkg/discover", d.pkg)
	require.Equal(t, "BenchmarkDiscover/devices=1/libs=10", d.name)
	require.Equal(t, 1498209*time.Nanosecond, d.median(), "median of three repetitions")
	require.Equal(t, 190764.0, d.bytes)
	require.Equal(t, 2242.0, d.allocs)
	row := d.row()
	require.Equal(t, "go test -bench pkg/discover Discover/devices=1/libs=10", row.Name)
	require.Equal(t, "1.50 ms/op, 186 KiB/op, 2242 allocs/op", row.Value)
	require.Equal(t, Info, row.Status)

	h := got[1]
	require.Equal(t, "BenchmarkCreateSymlinks", h.name, "no -N suffix without GOMAXPROCS > 1")
	require.Equal(t, 250*time.Microsecond, h.median())
	require.Zero(t, h.allocs, "no -benchmem fields")
}

func TestParseGoBenchCustomMetrics(t *testing.T) {
	got, err := parseGoBench(strings.NewReader("pkg: github.com/xpu-cdi/xpu-cdi/internal/dra\n" +
		"BenchmarkPrepare/xpus=8-2 200 5969629 ns/op 3.029 median-ms 55.32 p99-ms\n" +
		"BenchmarkPrepare/xpus=1-2 200 4680047 ns/op 6.5 median-ms 25.82 p99-ms\n"))
	require.NoError(t, err)
	require.Len(t, got, 2)
	row := got[0].row()
	require.Equal(t, "5.97 ms/op, 0 KiB/op, 0 allocs/op, median 3.03 ms, p99 55.32 ms", row.Value)
	require.Equal(t, "median < 5 ms", row.Target)
	require.Equal(t, Pass, row.Status)
	require.Equal(t, Info, got[1].row().Status, "the target is for 8 XPUs")
	got[0].custom["median"] = 5.2
	require.Equal(t, Fail, got[0].row().Status)
}

func TestPodStartRow(t *testing.T) {
	out := "pkg: github.com/xpu-cdi/xpu-cdi/tests/e2e\n" +
		"BenchmarkPodStart/dra-2 10 1200000000 ns/op 1100 median-ms 1500 p99-ms\n" +
		"BenchmarkPodStart/device-plugin-2 10 1100000000 ns/op 1050 median-ms 1400 p99-ms\n"
	got, err := parseGoBench(strings.NewReader(out))
	require.NoError(t, err)
	r, ok := podStartRow(got)
	require.True(t, ok)
	require.Equal(t, "1100 ms / 1050 ms (x1.05)", r.Value)
	require.Equal(t, Pass, r.Status, "within the noise allowance")
	got[0].custom["median"] = 1300
	r, _ = podStartRow(got)
	require.Equal(t, Fail, r.Status)
	_, ok = podStartRow(got[:1])
	require.False(t, ok, "no row without both")
}

func TestParseGoBenchEven(t *testing.T) {
	got, err := parseGoBench(strings.NewReader("pkg: x\nBenchmarkA-2 1 10 ns/op\nBenchmarkA-2 1 20 ns/op\n"))
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 15*time.Nanosecond, got[0].median())
}

func TestMarkdownEscapes(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeMarkdown(&b, []Row{{Section: "1", Name: "a|b", Value: "", Target: "< 1 ms", Status: Pass}}))
	require.Contains(t, b.String(), `| 1 | a\|b | - | < 1 ms | PASS |`)
}
