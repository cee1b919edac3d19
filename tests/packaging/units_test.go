package packaging

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/partition"
)

// TestUnitsVerify runs systemd-analyze verify on the shipped units in a
// temporary root holding the host's own units (for sysinit.target and
// friends) and an executable /usr/bin/xpu-cdi. systemd-analyze exits 0 on
// unknown keys and only prints them, so any output is a failure; the broken
// unit case shows that the check catches one.
func TestUnitsVerify(t *testing.T) {
	requireTools(t, "systemd-analyze")
	src := filepath.Join(repoRoot(t), "packaging", "systemd")
	service, err := os.ReadFile(filepath.Join(src, "xpu-cdi-refresh.service"))
	require.NoError(t, err)
	path, err := os.ReadFile(filepath.Join(src, "xpu-cdi-refresh.path"))
	require.NoError(t, err)

	tests := []struct {
		description string
		service     string
		wantClean   bool
	}{
		{description: "shipped units", service: string(service), wantClean: true},
		{
			description: "misspelt hardening key is reported",
			service:     strings.Replace(string(service), "\nProtectSystem=strict\n", "\nProtectSytem=strict\n", 1),
		},
		{
			description: "missing ExecStart binary is reported",
			service:     strings.Replace(string(service), "\nExecStart=/usr/bin/xpu-cdi refresh\n", "\nExecStart=/usr/bin/xpu-cdi-missing refresh\n", 1),
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			require.Equal(t, tc.wantClean, tc.service == string(service), "the broken case must change the unit")
			root, unitDir := unitRoot(t, "xpu-cdi")
			require.NoError(t, os.WriteFile(filepath.Join(unitDir, "xpu-cdi-refresh.service"), []byte(tc.service), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(unitDir, "xpu-cdi-refresh.path"), path, 0o644))

			// One unit per call: given several, systemd-analyze 252 does not
			// always print the warnings of the first.
			var out string
			var err error
			for _, unit := range []string{"xpu-cdi-refresh.service", "xpu-cdi-refresh.path"} {
				o, e := runErr([]string{"SYSTEMD_LOG_TARGET=console"}, "systemd-analyze", "--man=no", "--root="+root, "verify", filepath.Join(unitDir, unit))
				out += o
				err = errors.Join(err, e)
			}
			if tc.wantClean {
				require.NoError(t, err, out)
				require.Empty(t, strings.TrimSpace(out), "systemd-analyze verify complained")
				return
			}
			require.NotEmpty(t, strings.TrimSpace(out), "systemd-analyze verify accepted a broken unit in %s", root)
		})
	}
}

// unitRoot is a temporary root for systemd-analyze verify: the host's units,
// an executable /usr/bin/<bin> and an empty unit directory, returned.
func unitRoot(t *testing.T, bin string) (root, unitDir string) {
	t.Helper()
	root = t.TempDir()
	unitDir = filepath.Join(root, "etc", "systemd", "system")
	require.NoError(t, os.MkdirAll(unitDir, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr", "bin", bin), []byte("#!/bin/sh\n"), 0o755))
	copyHostUnits(t, filepath.Join(root, "usr", "lib", "systemd", "system"))
	return root, unitDir
}

// copyHostUnits copies the host's system unit directory (targets, slices
// and services the shipped units depend on) into dst. With only some of
// them, systemd-analyze stops checking the unit without a word.
func copyHostUnits(t *testing.T, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	run(t, nil, "cp", "-a", "/lib/systemd/system/.", dst)
}

// TestExporterUnit: xpu-exporter.service verifies clean and the preset
// leaves it disabled (the refresh units enabled).
func TestExporterUnit(t *testing.T) {
	requireTools(t, "systemd-analyze")
	src := filepath.Join(repoRoot(t), "packaging", "systemd")
	root, unitDir := unitRoot(t, "xpu-exporter")
	unit, err := os.ReadFile(filepath.Join(src, "xpu-exporter.service"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(unitDir, "xpu-exporter.service"), unit, 0o644))
	o, err := runErr([]string{"SYSTEMD_LOG_TARGET=console"}, "systemd-analyze", "--man=no", "--root="+root, "verify", filepath.Join(unitDir, "xpu-exporter.service"))
	require.NoError(t, err, o)
	require.Empty(t, strings.TrimSpace(o), "systemd-analyze verify complained")

	preset, err := os.ReadFile(filepath.Join(src, "50-xpu-cdi.preset"))
	require.NoError(t, err)
	lines := strings.Split(string(preset), "\n")
	require.Contains(t, lines, "disable xpu-exporter.service")
	require.Contains(t, lines, "enable xpu-cdi-refresh.service")
}

// TestPartitionsUnit: xpu-cdi-partitions.service verifies clean, runs only
// where /etc/xpu-cdi/partitions.conf exists, is ordered before the spec
// refresh (which is after it) and enabled by the preset; the shipped
// partitions.conf changes nothing (every line a comment or blank).
func TestPartitionsUnit(t *testing.T) {
	src := filepath.Join(repoRoot(t), "packaging")
	unit, err := os.ReadFile(filepath.Join(src, "systemd", "xpu-cdi-partitions.service"))
	require.NoError(t, err)
	keys := unitKeys(string(unit))
	require.Equal(t, []string{"oneshot"}, keys["Type"])
	require.Equal(t, []string{"/etc/xpu-cdi/partitions.conf"}, keys["ConditionPathExists"])
	require.Equal(t, []string{"/usr/bin/xpu-cdi partition apply --config /etc/xpu-cdi/partitions.conf"}, keys["ExecStart"])
	// The layout lock's directory: root's, 0700, writable under
	// ProtectSystem=strict, and kept (partition.LockDir).
	require.Equal(t, []string{"xpu-cdi"}, keys["RuntimeDirectory"])
	require.Equal(t, []string{"0700"}, keys["RuntimeDirectoryMode"])
	require.Equal(t, []string{"yes"}, keys["RuntimeDirectoryPreserve"])
	require.Contains(t, strings.Fields(strings.Join(keys["Before"], " ")), "xpu-cdi-refresh.service")
	require.NotContains(t, keys, "ProtectKernelTunables", "it writes sriov_numvfs under /sys")
	require.NotContains(t, keys, "PrivateDevices", "it checks who holds /dev/xpu*")

	refresh, err := os.ReadFile(filepath.Join(src, "systemd", "xpu-cdi-refresh.service"))
	require.NoError(t, err)
	require.Contains(t, strings.Fields(strings.Join(unitKeys(string(refresh))["After"], " ")), "xpu-cdi-partitions.service")

	preset, err := os.ReadFile(filepath.Join(src, "systemd", "50-xpu-cdi.preset"))
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(preset), "\n"), "enable xpu-cdi-partitions.service")

	conf, err := os.ReadFile(filepath.Join(src, "etc", "partitions.conf"))
	require.NoError(t, err)
	for i, line := range strings.Split(string(conf), "\n") {
		line = strings.TrimSpace(line)
		require.Truef(t, line == "" || strings.HasPrefix(line, "#"), "partitions.conf line %d is not commented out: %q", i+1, line)
		// The commented examples (#all=2, no space) are layouts apply takes.
		if ex, ok := strings.CutPrefix(line, "#"); ok && ex != "" && !strings.HasPrefix(ex, " ") {
			_, err := partition.ParseLayout(ex)
			require.NoError(t, err, "partitions.conf line %d", i+1)
		}
	}
	pc, err := partition.ParseConfig(conf)
	require.NoError(t, err)
	_, err = pc.Layout("")
	require.ErrorIs(t, err, partition.ErrNoLayout, "the shipped file holds no layout: apply --config changes nothing")

	requireTools(t, "systemd-analyze")
	root, unitDir := unitRoot(t, "xpu-cdi")
	require.NoError(t, os.WriteFile(filepath.Join(unitDir, "xpu-cdi-partitions.service"), unit, 0o644))
	o, err := runErr([]string{"SYSTEMD_LOG_TARGET=console"}, "systemd-analyze", "--man=no", "--root="+root, "verify", filepath.Join(unitDir, "xpu-cdi-partitions.service"))
	require.NoError(t, err, o)
	require.Empty(t, strings.TrimSpace(o), "systemd-analyze verify complained")
}

// unitKeys reads the Key=value lines of a unit file (comments and section
// headers left out), every value of a key in order.
func unitKeys(unit string) map[string][]string {
	keys := map[string][]string{}
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			keys[k] = append(keys[k], v)
		}
	}
	return keys
}
