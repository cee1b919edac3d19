package testutil

import (
	"fmt"
	"testing"
)

// FakeTB records Skipf, Fatalf, Errorf and FailNow (what testify's require
// calls) instead of acting on them, for testing helpers that skip or fail a
// test; all but Errorf stop the calling function with a panic, as the real
// ones stop the goroutine. Run the helper through Call.
type FakeTB struct {
	testing.TB
	DidSkip, DidFail bool
	Msg              string
}

// Helper does nothing: the FakeTB is not a test.
func (f *FakeTB) Helper() {}

// Skipf records the skip and stops the caller.
func (f *FakeTB) Skipf(format string, args ...any) {
	f.DidSkip, f.Msg = true, fmt.Sprintf(format, args...)
	panic("skip")
}

// Fatalf records the failure and stops the caller.
func (f *FakeTB) Fatalf(format string, args ...any) {
	f.DidFail, f.Msg = true, fmt.Sprintf(format, args...)
	panic("fatal")
}

// Errorf records the failure; the caller goes on.
func (f *FakeTB) Errorf(format string, args ...any) {
	f.DidFail, f.Msg = true, fmt.Sprintf(format, args...)
}

// FailNow records a failure and stops the caller.
func (f *FakeTB) FailNow() {
	f.DidFail = true
	panic("fatal")
}

// Call runs fn with a FakeTB around t, stopping where Skipf or Fatalf would
// stop, and returns what it recorded.
func Call(t testing.TB, fn func(testing.TB)) *FakeTB {
	f := &FakeTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != "skip" && r != "fatal" {
				panic(r)
			}
		}()
		fn(f)
	}()
	return f
}
