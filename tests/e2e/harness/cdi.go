package harness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tags.cncf.io/container-device-interface/pkg/parser"
)

// TestVendorDomain ends every vendor UniqueVendor makes; InstallSpec refuses
// any other vendor, so tests can never overwrite a real vendor's spec.
const TestVendorDomain = ".xpu-cdi.test"

// HostCDIDir is the CDI spec directory of highest priority that Podman 4.3
// and `ctr run --device` read (neither can be pointed elsewhere).
const HostCDIDir = "/var/run/cdi"

// UniqueVendor returns a CDI vendor name unique to this test run, such as
// "e2e-1a2b3c4d5e6f.xpu-cdi.test". It is valid for every CDI library
// version (starts with a letter, ends with a letter, only letters, digits,
// '-' and '.').
func UniqueVendor(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("reading random bytes: %v", err)
	}
	vendor := "e2e-" + hex.EncodeToString(b[:]) + TestVendorDomain
	if err := parser.ValidateVendorName(vendor); err != nil {
		t.Fatalf("generated vendor %q is invalid: %v", vendor, err)
	}
	return vendor
}

// SpecFileName is the file name the harness uses for a test vendor's spec.
func SpecFileName(vendor string) string { return vendor + "-xpu.yaml" }

// InstallSpec writes spec (YAML or JSON) as HostCDIDir/<vendor>-xpu.yaml,
// mode 0644, and removes it when the test ends. vendor must come from
// UniqueVendor (end in TestVendorDomain). It returns the path written.
func InstallSpec(t testing.TB, spec []byte, vendor string) string {
	t.Helper()
	RequiresRoot(t)
	return WriteSpec(t, HostCDIDir, spec, vendor)
}

// WriteSpec writes spec as dir/<vendor>-xpu.yaml (mode 0644, via a
// temporary file and rename) and removes it when the test ends.
func WriteSpec(t testing.TB, dir string, spec []byte, vendor string) string {
	t.Helper()
	if err := checkTestVendor(vendor); err != nil {
		t.Fatalf("refusing to write a CDI spec: %v", err)
	}
	path := filepath.Join(dir, SpecFileName(vendor))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("creating %s: %v", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".e2e-spec-*.tmp")
	if err != nil {
		t.Fatalf("creating a temporary file in %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			t.Errorf("removing CDI spec %s: %v", path, err)
		}
	})
	_, werr := tmp.Write(spec)
	cerr := tmp.Close()
	if werr == nil && cerr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil && cerr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil || cerr != nil {
		_ = os.Remove(tmp.Name())
		t.Fatalf("writing CDI spec %s: %v %v", path, werr, cerr)
	}
	return path
}

func checkTestVendor(vendor string) error {
	if err := parser.ValidateVendorName(vendor); err != nil {
		return fmt.Errorf("vendor %q: %w", vendor, err)
	}
	if !strings.HasSuffix(vendor, TestVendorDomain) {
		return fmt.Errorf("vendor %q is not a test vendor (must end in %s, use UniqueVendor)", vendor, TestVendorDomain)
	}
	return nil
}
