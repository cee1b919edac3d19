// Package benchstat is the one definition of the quantiles every benchmark
// of the project reports (xpu-bench, the scale bench, the DRA driver's
// Go benchmarks), so that a p50 or p99 of one compares with another's.
package benchstat

import (
	"math"
	"slices"
	"time"
)

// Quantile returns the q-quantile (0..1) of d by linear interpolation
// between the closest ranks (Hyndman and Fan's type 7, the default of R and
// NumPy); 0 for no samples. d is not reordered.
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sorted := slices.Clone(d)
	slices.Sort(sorted)
	if q <= 0 {
		return sorted[0]
	}
	if q >= 1 {
		return sorted[len(sorted)-1]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return sorted[lo] + time.Duration(frac*float64(sorted[hi]-sorted[lo]))
}

// Median is Quantile(d, 0.5).
func Median(d []time.Duration) time.Duration { return Quantile(d, 0.5) }
