package testutil

import (
	"fmt"
	"testing"
	"time"
)

// Eventually calls cond every tick until it returns true without failing,
// for at most waitFor, and fails the test otherwise, with msgAndArgs (a
// format and its arguments, as testify's) and what the last try said.
//
// cond gets a testing.TB of its own (a FakeTB): a failure in it (require,
// assert, t.Fatal, a helper that fails its test) ends that try as "not yet"
// instead of ending the test, so that a transient error, such as a
// directory removed in the middle of a walk or an API server that
// restarts, is tried again. An assert whose failure explains why not yet
// (assert.Empty(t, records)) is the way to have the final message say what
// was last seen. A skip in cond skips the test.
//
// Unlike testify's Eventually, cond runs on the calling goroutine, one try
// at a time: what it sets is safe to read afterwards, and a try that blocks
// is bounded by the helper it calls, not by waitFor.
func Eventually(t testing.TB, cond func(t testing.TB) bool, waitFor, tick time.Duration, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	tries := 0
	for {
		tries++
		var ok bool
		f := Call(t, func(tb testing.TB) { ok = cond(tb) })
		if f.DidSkip {
			t.Skip(f.Msg)
		}
		if ok && !f.DidFail {
			return
		}
		if time.Now().After(deadline) {
			last := "the condition was false"
			if f.DidFail {
				last = "the last try failed: " + f.Msg
			}
			t.Fatalf("%scondition not met after %s (%d tries); %s", message(msgAndArgs), waitFor, tries, last)
		}
		time.Sleep(tick)
	}
}

// message formats testify-style msgAndArgs as a prefix ending in ": ".
func message(msgAndArgs []any) string {
	switch {
	case len(msgAndArgs) == 0:
		return ""
	case len(msgAndArgs) == 1:
		return fmt.Sprint(msgAndArgs[0]) + ": "
	}
	format, ok := msgAndArgs[0].(string)
	if !ok {
		return fmt.Sprint(msgAndArgs...) + ": "
	}
	return fmt.Sprintf(format, msgAndArgs[1:]...) + ": "
}
