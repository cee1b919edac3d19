package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A directory that is not there yet (or removed in the middle of a walk)
// fails a try, not the test: the next try sees it.
func TestEventuallyRetriesAFailedTry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	tries := 0
	f := Call(t, func(tb testing.TB) {
		Eventually(tb, func(t testing.TB) bool {
			tries++
			if tries == 3 {
				require.NoError(t, os.Mkdir(dir, 0o755))
			}
			_, err := os.ReadDir(dir)
			require.NoError(t, err, "a transient error")
			return true
		}, 5*time.Second, time.Millisecond)
	})
	require.False(t, f.DidFail, f.Msg)
	require.Equal(t, 3, tries)
}

func TestEventuallyReportsTheLastTry(t *testing.T) {
	n := 0
	f := Call(t, func(tb testing.TB) {
		Eventually(tb, func(t testing.TB) bool {
			n++
			return assert.Empty(t, []int{n}, "records left")
		}, 50*time.Millisecond, 5*time.Millisecond, "the claims of %s are unprepared", "pod-a")
	})
	require.True(t, f.DidFail)
	require.Contains(t, f.Msg, "the claims of pod-a are unprepared: condition not met after 50ms")
	require.Contains(t, f.Msg, "records left")
	require.Contains(t, f.Msg, "the last try failed")

	f = Call(t, func(tb testing.TB) {
		Eventually(tb, func(testing.TB) bool { return false }, 10*time.Millisecond, time.Millisecond)
	})
	require.True(t, f.DidFail)
	require.Contains(t, f.Msg, "the condition was false")

	f = Call(t, func(tb testing.TB) {
		Eventually(tb, func(t testing.TB) bool { t.Error(errors.New("an Error, then true")); return true }, 10*time.Millisecond, time.Millisecond)
	})
	require.True(t, f.DidFail, "a try that failed is not met even if it returned true")
}

func TestEventuallySkips(t *testing.T) {
	f := Call(t, func(tb testing.TB) {
		Eventually(tb, func(t testing.TB) bool { t.Skip("no tool"); return true }, time.Second, time.Millisecond)
	})
	require.True(t, f.DidSkip)
	require.Equal(t, "no tool", f.Msg)
}

func TestFakeTBRecordsEveryFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func(testing.TB)
		skip bool
	}{
		{"Fatal", func(tb testing.TB) { tb.Fatal("x") }, false},
		{"Error", func(tb testing.TB) { tb.Error("x") }, false},
		{"Fail", func(tb testing.TB) { tb.Fail() }, false},
		{"FailNow", func(tb testing.TB) { tb.FailNow() }, false},
		{"Skip", func(tb testing.TB) { tb.Skip("x") }, true},
		{"SkipNow", func(tb testing.TB) { tb.SkipNow() }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Call(t, tc.fn)
			require.Equal(t, tc.skip, f.DidSkip)
			require.Equal(t, !tc.skip, f.DidFail)
			require.Equal(t, !tc.skip, f.Failed())
		})
	}
	require.False(t, t.Failed(), "nothing reached the real test")
}
