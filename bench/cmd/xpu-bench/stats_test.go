package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestQuantile(t *testing.T) {
	ms := func(v ...int) samples {
		var s samples
		for _, x := range v {
			s = append(s, time.Duration(x)*time.Millisecond)
		}
		return s
	}
	tests := []struct {
		description string
		s           samples
		q           float64
		want        time.Duration
	}{
		{description: "empty", s: nil, q: 0.5, want: 0},
		{description: "odd count median", s: ms(5, 1, 3), q: 0.5, want: 3 * time.Millisecond},
		{description: "even count median interpolates", s: ms(4, 1, 2, 3), q: 0.5, want: 2500 * time.Microsecond},
		{description: "p99 of 1..100", s: ms(seq(100)...), q: 0.99, want: 99010 * time.Microsecond},
		{description: "min", s: ms(7, 3, 9), q: 0, want: 3 * time.Millisecond},
		{description: "max", s: ms(7, 3, 9), q: 1, want: 9 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			in := append(samples(nil), tc.s...)
			require.Equal(t, tc.want, tc.s.quantile(tc.q))
			require.Equal(t, in, tc.s, "quantile must not reorder its input")
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestPairedDiffAndRatio(t *testing.T) {
	a := samples{10 * time.Millisecond, 12 * time.Millisecond, 50 * time.Millisecond}
	b := samples{11 * time.Millisecond, 13 * time.Millisecond, 51 * time.Millisecond, time.Second}
	d := pairedDiff(a, b)
	require.Len(t, d, 3, "only complete pairs count")
	require.Equal(t, time.Millisecond, d.median())
	require.InDelta(t, 13.0/12.0, ratio(a, b[:3]), 1e-9)
	require.Zero(t, ratio(nil, b))
}

func TestMs(t *testing.T) {
	require.Equal(t, "0.85 ms", ms(850*time.Microsecond))
	require.Equal(t, "12.3 ms", ms(12340*time.Microsecond))
	require.Equal(t, "250 ms", ms(250*time.Millisecond))
	require.Equal(t, "-1.50 ms", ms(-1500*time.Microsecond))
}
