// Package testreq is the one policy for tests that need something the
// machine may lack (root, a tool on PATH, a host file): on a developer's
// laptop such a test skips, saying what is missing and how to get it; under
// CI=true (or XPU_E2E_REQUIRE=1) it fails, so that a CI run as root with the
// tools installed never passes by skipping.
//
// It imports only the standard library, so any test may use it without
// pulling in the end-to-end harness (tests/e2e/harness forwards its
// RequiresRoot and RequiresTool here). It is for tests only and is never
// part of a shipped binary.
package testreq
