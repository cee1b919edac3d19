package xpusmi

import (
	"math"
	"testing"
)

// FuzzParseM: any output parses without a panic, and every sample it gives
// is a device's values (in range, in base units).
func FuzzParseM(f *testing.F) {
	f.Add([]byte(mLine("0", "45", "80.5", "1024", "98304", "37") + "\n"))
	f.Add([]byte("xpu 1 2 3\n\n\x00"))
	f.Add([]byte(mLine("3", "-1e3", "1e400", "0x10", "+5", "1_0")))
	f.Fuzz(func(t *testing.T, out []byte) {
		samples, errs := ParseM(out)
		seen := map[int]bool{}
		for _, s := range samples {
			if s.Index < 0 || seen[s.Index] {
				t.Fatalf("index %d negative or twice", s.Index)
			}
			seen[s.Index] = true
			for _, v := range []float64{s.Temperature, s.Power, s.MemoryUsed, s.MemoryTotal, s.Utilization} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("sample %+v has a value that is not a number", s)
				}
			}
			if s.Utilization < 0 || s.Utilization > 1 || s.MemoryUsed > s.MemoryTotal || s.Power < 0 {
				t.Fatalf("sample %+v out of range", s)
			}
		}
		for _, e := range errs {
			if len(e.Error()) > 400 {
				t.Fatalf("error of %d bytes", len(e.Error()))
			}
		}
	})
}

// FuzzParseQ: any output parses without a panic, and a Bus Id it gives is
// a PCI address in the kernel's form.
func FuzzParseQ(f *testing.F) {
	f.Add([]byte("Bus Id : 00000000:03:00.0\n"))
	f.Add([]byte("Bus Id:\n:Bus Id\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		d, err := ParseQ(out)
		if err == nil {
			if _, ok := NormalizeBusID(d.BusID); !ok || len(d.BusID) != 12 {
				t.Fatalf("bus ID %q", d.BusID)
			}
		}
	})
}
