// Package fdiotest holds the hostile files of the tests of every reader of
// host files (a FIFO without a writer, a link to /dev/zero), and a bound on
// the time a reader may take, so that a reader without fdio's checks fails
// its test instead of hanging it.
package fdiotest

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Hostile is a file planted where a reader expects a regular one.
type Hostile struct {
	Description string
	Plant       func(path string) error
}

// HostileFiles are a FIFO (an open for reading blocks until a writer
// comes) and a symlink to /dev/zero (a read never ends).
func HostileFiles() []Hostile {
	return []Hostile{
		{Description: "a FIFO", Plant: func(path string) error { return unix.Mkfifo(path, 0o644) }},
		{Description: "a link to /dev/zero", Plant: func(path string) error { return os.Symlink("/dev/zero", path) }},
	}
}

// Timeout is what a reader of a hostile file may take: it should fail at
// once.
const Timeout = 10 * time.Second

// Within returns what f returns, failing t when f takes more than Timeout
// (what names the reader in the message). f runs in another goroutine: it
// must not call t's Fatal methods.
func Within[T any](t testing.TB, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case r := <-done:
		return r
	case <-time.After(Timeout):
		t.Fatalf("%s blocks on a hostile file", what)
		var zero T
		return zero
	}
}
