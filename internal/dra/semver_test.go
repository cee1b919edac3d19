package dra

import (
	"testing"

	"github.com/blang/semver/v4"
)

// FuzzSemVer holds SemVer to the semantic versioning the API server's
// version attributes take (blang/semver, which the Kubernetes CEL library
// uses): whatever it maps parses strictly and prints back the same, and a
// strict semantic version without pre-release or build stays as it is.
func FuzzSemVer(f *testing.F) {
	for _, s := range []string{"4.33.0", "4.33", "5.0.21.47", "0001.0000.0020", "v5.0.21", "5.0.21.1.2.3", "1.2.3-rc1", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := SemVer(v)
		if !ok {
			if got != "" {
				t.Fatalf("SemVer(%q) = %q but not ok", v, got)
			}
			return
		}
		parsed, err := semver.Parse(got)
		if err != nil {
			t.Fatalf("SemVer(%q) = %q, not a semantic version: %v", v, got, err)
		}
		if parsed.String() != got {
			t.Fatalf("SemVer(%q) = %q, which prints back as %q", v, got, parsed.String())
		}
		if want, err := semver.Parse(v); err == nil && len(want.Pre) == 0 && len(want.Build) == 0 && got != v {
			t.Fatalf("SemVer(%q) = %q, want the version unchanged", v, got)
		}
	})
}
