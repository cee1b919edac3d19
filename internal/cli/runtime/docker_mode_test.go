package runtime

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/pkg/runtimeconfig"
)

// fakeDockerd writes a dockerd that prints version as `dockerd --version`
// does (or runs body when given) and returns its path.
func fakeDockerd(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dockerd")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

func printsVersion(v string) string { return "echo 'Docker version " + v + "'" }

func readDaemonJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// TestDockerModeFromVersion: --mode auto asks dockerd for its version:
// Docker 25 and later get their own CDI (features.cdi, no shim), 20.10 the
// shim; the output says which mode and why; --revert undoes either; --mode
// overrides the choice.
func TestDockerModeFromVersion(t *testing.T) {
	for _, tc := range []struct {
		description string
		version     string
		mode        string // --mode
		want        runtimeconfig.DockerMode
	}{
		{description: "Debian 13's Docker 26", version: "26.1.5+dfsg1, build a72d7cd", mode: "auto", want: runtimeconfig.DockerModeCDI},
		{description: "Docker 25.0", version: "25.0.0, build e758fe5", mode: "auto", want: runtimeconfig.DockerModeCDI},
		{description: "Docker 28.2", version: "28.2.2, build e6534b4", mode: "auto", want: runtimeconfig.DockerModeCDI},
		{description: "Debian 12's Docker 20.10", version: "20.10.24+dfsg1, build 297e128", mode: "auto", want: runtimeconfig.DockerModeShim},
		{description: "Docker 24", version: "24.0.9, build fca702d", mode: "auto", want: runtimeconfig.DockerModeShim},
		{description: "shim forced on Docker 26 (XPU_VISIBLE_DEVICES users)", version: "26.1.5+dfsg1, build a72d7cd", mode: "shim", want: runtimeconfig.DockerModeShim},
		{description: "cdi forced", version: "20.10.24+dfsg1, build 297e128", mode: "cdi", want: runtimeconfig.DockerModeCDI},
	} {
		t.Run(tc.description, func(t *testing.T) {
			root := t.TempDir()
			cfg := filepath.Join(root, "daemon.json")
			require.NoError(t, os.WriteFile(cfg, []byte(`{"log-level": "warn"}`), 0o644))
			before := tree(t, root)
			dockerd := fakeDockerd(t, printsVersion(tc.version))

			out, err := runApp(t, "--runtime", "docker", "--config", cfg, "--dockerd", dockerd, "--mode", tc.mode)
			require.NoError(t, err)
			require.Contains(t, out, "docker: mode "+string(tc.want)+" (")
			m := readDaemonJSON(t, cfg)
			require.Equal(t, "warn", m["log-level"], "the admin's keys stay")
			runtimes, hasShim := m["runtimes"]
			if tc.want == runtimeconfig.DockerModeCDI {
				require.Equal(t, map[string]any{"cdi": true}, m["features"])
				require.False(t, hasShim, "no shim in mode cdi: %v", runtimes)
				require.NotContains(t, m, "cdi-spec-dirs", "Docker's defaults are the CDI library's")
			} else {
				require.Equal(t, map[string]any{"xpu": map[string]any{"path": "/usr/bin/xpu-container-runtime"}}, runtimes)
				require.NotContains(t, m, "features")
			}

			out, err = runApp(t, "--runtime", "docker", "--config", cfg, "--dockerd", dockerd, "--mode", tc.mode)
			require.NoError(t, err)
			require.Contains(t, out, "already configured")

			// The revert needs no dockerd: the record says what was set.
			_, err = runApp(t, "--runtime", "docker", "--config", cfg, "--dockerd", "/nonexistent/dockerd", "--revert")
			require.NoError(t, err)
			require.Equal(t, before, tree(t, root), "--revert gives back the file as it was")
		})
	}
}

func TestDockerModeErrors(t *testing.T) {
	root := t.TempDir()
	cfg := filepath.Join(root, "daemon.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{}`), 0o644))
	before := tree(t, root)
	for _, tc := range []struct {
		description string
		args        []string
		want        string
	}{
		{"no dockerd", []string{"--dockerd", "/nonexistent/dockerd"}, "pass --dockerd PATH, or --mode cdi or --mode shim"},
		{"dockerd says no version", []string{"--dockerd", fakeDockerd(t, "echo hello")}, "pass --mode cdi or --mode shim"},
		{"dockerd fails", []string{"--dockerd", fakeDockerd(t, "exit 3")}, "exit status 3"},
		{"unknown mode", []string{"--mode", "jit"}, `docker mode "jit": want cdi or shim`},
		{"cdi and set-as-default", []string{"--mode", "cdi", "--set-as-default"}, "--set-as-default"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, err := runApp(t, append([]string{"--runtime", "docker", "--config", cfg}, tc.args...)...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.Equal(t, before, tree(t, root), "nothing written")
		})
	}
	_, err := runApp(t, "--runtime", "podman", "--drop-in-file", filepath.Join(root, "99-xpu.conf"), "--mode", "cdi")
	require.ErrorContains(t, err, "--mode cdi: the mode applies to --runtime docker only")
	require.Equal(t, before, tree(t, root), "nothing written")
}

// TestDockerdVersionBounded: a dockerd that does not answer is given up on
// after the timeout, with the flags that avoid asking it.
func TestDockerdVersionBounded(t *testing.T) {
	hang := fakeDockerd(t, "exec sleep 60")
	start := time.Now()
	_, err := dockerdVersion(hang, 300*time.Millisecond)
	require.ErrorContains(t, err, "gave no answer within 300ms: pass --mode cdi or --mode shim")
	require.Less(t, time.Since(start), 5*time.Second)

	// Output beyond the bound is not kept.
	big := fakeDockerd(t, "echo 'Docker version 26.1.5, build x'; head -c 1000000 /dev/zero")
	v, err := dockerdVersion(big, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, runtimeconfig.DockerVersion{Major: 26, Minor: 1, Text: "26.1.5"}, v)
}
