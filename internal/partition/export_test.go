package partition

import (
	"testing"
	"time"
)

// SetScanTimeout bounds the in-use scan by d for the rest of the test, for
// the tests of the writer's refusals kept beside the scan (package
// partition_test, which imports the writer).
func SetScanTimeout(t testing.TB, d time.Duration) {
	old := scanTimeout
	scanTimeout = d
	t.Cleanup(func() { scanTimeout = old })
}
