package testutil

import (
	"fmt"
	"testing"
)

// FakeTB records Skip*, Fatal*, Error*, Fail and FailNow (what testify's
// require and assert call) instead of acting on them, for testing helpers
// that skip or fail a test and for conditions that are tried again; all but
// Error*, Fail and the Log family stop the calling function with a panic,
// as the real ones stop the goroutine. Run the helper through Call.
// Everything else (Logf, TempDir, Cleanup, Context) reaches the real test.
type FakeTB struct {
	testing.TB
	DidSkip, DidFail bool
	Msg              string
}

// stop is what FakeTB panics with to stop its caller; Call recovers it and
// nothing else.
type stop struct{}

// Helper does nothing: the FakeTB is not a test.
func (f *FakeTB) Helper() {}

// Skip records the skip and stops the caller.
func (f *FakeTB) Skip(args ...any) { f.skip(fmt.Sprint(args...)) }

// Skipf records the skip and stops the caller.
func (f *FakeTB) Skipf(format string, args ...any) { f.skip(fmt.Sprintf(format, args...)) }

// SkipNow records the skip and stops the caller.
func (f *FakeTB) SkipNow() { f.skip("") }

// Skipped reports whether Skip* was called.
func (f *FakeTB) Skipped() bool { return f.DidSkip }

func (f *FakeTB) skip(msg string) {
	f.DidSkip, f.Msg = true, msg
	panic(stop{})
}

// Fatal records the failure and stops the caller.
func (f *FakeTB) Fatal(args ...any) {
	f.Error(args...)
	panic(stop{})
}

// Fatalf records the failure and stops the caller.
func (f *FakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	panic(stop{})
}

// Error records the failure; the caller goes on.
func (f *FakeTB) Error(args ...any) { f.DidFail, f.Msg = true, fmt.Sprint(args...) }

// Errorf records the failure; the caller goes on.
func (f *FakeTB) Errorf(format string, args ...any) {
	f.DidFail, f.Msg = true, fmt.Sprintf(format, args...)
}

// Fail records a failure; the caller goes on.
func (f *FakeTB) Fail() { f.DidFail = true }

// FailNow records a failure and stops the caller.
func (f *FakeTB) FailNow() {
	f.DidFail = true
	panic(stop{})
}

// Failed reports whether a failure was recorded.
func (f *FakeTB) Failed() bool { return f.DidFail }

// Call runs fn with a FakeTB around t, stopping where Skipf or Fatalf would
// stop, and returns what it recorded.
func Call(t testing.TB, fn func(testing.TB)) *FakeTB {
	f := &FakeTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stop); !ok {
					panic(r)
				}
			}
		}()
		fn(f)
	}()
	return f
}
