package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

func runApp(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := newApp(&stdout, &stderr).Run(append([]string{"xpu-fakehost"}, args...))
	return stdout.String(), stderr.String(), err
}

func TestCommand(t *testing.T) {
	cases := []struct {
		description string
		args        []string
		prepare     func(t *testing.T, root string)
		wantErr     string
		check       func(t *testing.T, root, stdout, stderr string)
	}{
		{
			description: "unknown shape lists the valid ones",
			args:        []string{"--shape", "p900"},
			wantErr:     "valid shapes are p800x8, p800-xre5, p800-sysfs, p800-sriov, p800-quarters, p800x8-sriov, r200-sriov, k200, degraded, scaled",
		},
		{
			description: "--sriov on a shape without SR-IOV",
			args:        []string{"--shape", "p800x8", "--sriov"},
			wantErr:     "--sriov: the p800x8 shape has no card with SR-IOV; use one of p800-sriov, p800-quarters, p800x8-sriov, r200-sriov",
		},
		{
			description: "--sriov without sysfs",
			args:        []string{"--shape", "p800-sriov", "--sriov", "--no-sysfs"},
			wantErr:     "--sriov with --no-sysfs",
		},
		{
			description: "negative devices",
			args:        []string{"--shape", "scaled", "--devices", "-1"},
			wantErr:     "must not be negative",
		},
		{
			description: "json record",
			args:        []string{"--shape", "r200-sriov", "--json", "--no-mknod"},
			check: func(t *testing.T, root, stdout, stderr string) {
				var tr fakehost.Tree
				require.NoError(t, json.Unmarshal([]byte(stdout), &tr))
				require.Equal(t, fakehost.ShapeR200SRIOV, tr.Shape)
				require.Len(t, tr.Devices, 5)
				require.Contains(t, stderr, "fake r200-sriov host in "+root)
				require.FileExists(t, filepath.Join(root, "dev/xpu4"))
			},
		},
		{
			description: "p800-sysfs: nodes found through /sys/dev/char, not in address order",
			args:        []string{"--shape", "p800-sysfs", "--json", "--no-mknod"},
			check: func(t *testing.T, root, stdout, stderr string) {
				var tr fakehost.Tree
				require.NoError(t, json.Unmarshal([]byte(stdout), &tr))
				require.Equal(t, fakehost.ShapeP800Sysfs, tr.Shape)
				require.Len(t, tr.Devices, 8)
				require.Equal(t, "/sys/dev/char/195:0", tr.Devices[0].DevChar)
				fn, err := filepath.EvalSymlinks(filepath.Join(root, "sys/dev/char/195:0/device"))
				require.NoError(t, err)
				require.Equal(t, "0000:82:00.0", filepath.Base(fn))
				require.NoDirExists(t, filepath.Join(root, "sys/class/xpu"))
				st, err := os.Stat(filepath.Join(root, "sys/class/kunlun/xpu0"))
				require.NoError(t, err)
				require.True(t, st.IsDir(), "the class link leads to the class device")
			},
		},
		{
			description: "scaled with knobs",
			args: []string{
				"--shape", "scaled", "--devices", "3", "--libraries", "9", "--major", "239",
				"--xre-version", "5.2.0", "--no-ctrl", "--no-procfs",
			},
			check: func(t *testing.T, root, stdout, stderr string) {
				require.Empty(t, stdout)
				require.NoFileExists(t, filepath.Join(root, "dev/xpuctrl"))
				require.NoDirExists(t, filepath.Join(root, "proc"))
				entries, err := os.ReadDir(filepath.Join(root, "usr/local/xpu-5.2.0/lib64"))
				require.NoError(t, err)
				require.Len(t, entries, 11) // 9 files + 2 dev links
				b, err := os.ReadFile(filepath.Join(root, "sys/class/xpu/xpu2/dev"))
				require.NoError(t, err)
				require.Equal(t, "239:4\n", string(b))
			},
		},
		{
			description: "non-empty root is refused",
			args:        []string{"--shape", "k200"},
			prepare: func(t *testing.T, root string) {
				require.NoError(t, os.MkdirAll(root, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, "precious"), []byte("x"), 0o644))
			},
			wantErr: "is not empty: pass --force",
		},
		{
			description: "force does not delete what is not a fake host",
			args:        []string{"--shape", "k200", "--force"},
			prepare: func(t *testing.T, root string) {
				require.NoError(t, os.MkdirAll(root, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, "precious"), []byte("x"), 0o644))
			},
			wantErr: "not a fake host tree",
		},
		{
			description: "force replaces an earlier fake host",
			args:        []string{"--shape", "k200", "--force"},
			prepare: func(t *testing.T, root string) {
				_, _, err := runApp(t, "--shape", "p800x8", "--root", root)
				require.NoError(t, err)
				require.FileExists(t, filepath.Join(root, "dev/xpu7"))
			},
			check: func(t *testing.T, root, stdout, stderr string) {
				require.NoFileExists(t, filepath.Join(root, "dev/xpu7"))
				require.FileExists(t, filepath.Join(root, "proc/xpu/dev1/info"))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.description, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "host")
			if tc.prepare != nil {
				tc.prepare(t, root)
			}
			stdout, stderr, err := runApp(t, append(tc.args, "--root", root)...)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				if tc.prepare != nil {
					require.FileExists(t, filepath.Join(root, "precious"))
				}
				return
			}
			require.NoError(t, err, stderr)
			tc.check(t, root, stdout, stderr)
		})
	}
}
