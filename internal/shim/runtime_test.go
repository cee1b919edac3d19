package shim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFindRuntime(t *testing.T) {
	dir := t.TempDir()
	bin1, bin2 := filepath.Join(dir, "bin1"), filepath.Join(dir, "bin2")
	for _, d := range []string{bin1, bin2} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	exe := func(p string) string {
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
		return p
	}
	self := exe(filepath.Join(dir, "shim"))
	runc2 := exe(filepath.Join(bin2, "runc"))
	crun1 := exe(filepath.Join(bin1, "crun"))
	require.NoError(t, os.WriteFile(filepath.Join(bin1, "notexec"), nil, 0o644))
	require.NoError(t, os.Symlink(self, filepath.Join(bin1, "runc"))) // the shim installed as runc
	require.NoError(t, os.Mkdir(filepath.Join(bin1, "dirrt"), 0o755))
	path := bin1 + ":relative:" + bin2

	tests := []struct {
		description string
		candidates  []string
		want        string
		wantErr     []string
	}{
		{description: "skips the shim under the runtime's name", candidates: []string{"runc", "crun"}, want: runc2},
		{description: "order of the list wins", candidates: []string{"crun", "runc"}, want: crun1},
		{description: "absolute path", candidates: []string{runc2}, want: runc2},
		{description: "absolute path to the shim is skipped", candidates: []string{self, "crun"}, want: crun1},
		{description: "not executable, directories skipped", candidates: []string{"notexec", "dirrt", "crun"}, want: crun1},
		{
			description: "nothing found", candidates: []string{"nope", self, filepath.Join(dir, "missing")},
			wantErr: []string{"no low-level OCI runtime found", "nope", self + " (the shim itself)", "low-level-runtimes"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, err := FindRuntime(tc.candidates, path, self)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, errNoRuntime)
				for _, w := range tc.wantErr {
					require.ErrorContains(t, err, w)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	// A hard link to the shim is the shim too.
	require.NoError(t, os.Link(self, filepath.Join(bin2, "crun")))
	_, err := FindRuntime([]string{"crun"}, bin2, self)
	require.ErrorIs(t, err, errNoRuntime)
}
