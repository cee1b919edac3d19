package testutil

import (
	"os"
	"testing"
)

// ShortDir returns a new temporary directory named prefix plus a random
// suffix directly in os.TempDir(), removed when the test ends. t.TempDir()
// paths carry the test's name and outgrow what a unix socket's path (108
// bytes) or Podman's runroot (50) accept.
func ShortDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatalf("creating a short temporary directory: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
