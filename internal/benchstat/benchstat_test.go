package benchstat

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var s []time.Duration
		for _, x := range v {
			s = append(s, time.Duration(x)*time.Millisecond)
		}
		return s
	}
	seq := make([]int, 100)
	for i := range seq {
		seq[i] = i + 1
	}
	tests := []struct {
		description string
		s           []time.Duration
		q           float64
		want        time.Duration
	}{
		{description: "empty", s: nil, q: 0.5, want: 0},
		{description: "odd count median", s: ms(5, 1, 3), q: 0.5, want: 3 * time.Millisecond},
		{description: "even count median interpolates", s: ms(4, 1, 2, 3), q: 0.5, want: 2500 * time.Microsecond},
		{description: "p99 of 1..100", s: ms(seq...), q: 0.99, want: 99010 * time.Microsecond},
		{description: "p99 of two interpolates", s: ms(300, 100), q: 0.99, want: 298 * time.Millisecond},
		{description: "min", s: ms(7, 3, 9), q: 0, want: 3 * time.Millisecond},
		{description: "max", s: ms(7, 3, 9), q: 1, want: 9 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			in := append([]time.Duration(nil), tc.s...)
			require.Equal(t, tc.want, Quantile(tc.s, tc.q))
			require.Equal(t, in, tc.s, "Quantile must not reorder its input")
		})
	}
	require.Equal(t, 3*time.Millisecond, Median(ms(5, 1, 3)))
}
