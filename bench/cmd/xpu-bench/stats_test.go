package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
