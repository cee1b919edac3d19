package main

import (
	"fmt"
	"math"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/benchstat"
)

// samples are durations of one measured configuration.
type samples []time.Duration

// quantile returns the q-quantile (0..1) of s, as every benchmark of the
// project defines it (internal/benchstat).
func (s samples) quantile(q float64) time.Duration { return benchstat.Quantile(s, q) }

func (s samples) median() time.Duration { return s.quantile(0.5) }

// pairedDiff returns b[i]-a[i] for the pairs measured side by side; the
// median of these is robust against drift of the machine's load during a
// run, which the difference of the two medians is not.
func pairedDiff(a, b samples) samples {
	n := min(len(a), len(b))
	out := make(samples, n)
	for i := range n {
		out[i] = b[i] - a[i]
	}
	return out
}

// ratio is median(b)/median(a); 0 when a has no positive median.
func ratio(a, b samples) float64 {
	ma := a.median()
	if ma <= 0 {
		return 0
	}
	return float64(b.median()) / float64(ma)
}

// ms formats d in milliseconds with a precision that suits its size.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case a >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}
