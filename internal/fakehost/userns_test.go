package fakehost

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

const inUserNSEnv = "XPU_FAKEHOST_TEST_IN_USERNS"

// TestMknodRefusedFallsBack runs Build as uid 0 of a user namespace, where
// the kernel refuses mknod: the tree must fall back to regular files with
// the facts recorded.
func TestMknodRefusedFallsBack(t *testing.T) {
	if os.Getenv(inUserNSEnv) == "1" {
		require.Equal(t, 0, os.Geteuid())
		tr := build(t, K200())
		require.False(t, tr.RealNodes)
		checkNodes(t, tr, 0o666, 0, 0)
		return
	}
	unshare := testreq.Tool(t, "unshare")
	probe := exec.Command(unshare, "--user", "--map-root-user", "true")
	if out, err := probe.CombinedOutput(); err != nil {
		testreq.Missing(t, "user namespaces unavailable: %v: %s", err, out)
	}
	cmd := exec.Command(unshare, "--user", "--map-root-user", os.Args[0],
		"-test.run=^TestMknodRefusedFallsBack$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), inUserNSEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "--- PASS: TestMknodRefusedFallsBack")
}
