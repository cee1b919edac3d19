package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// buildHook builds the hook with CGO_ENABLED=0, as it is shipped.
func buildHook(t *testing.T) string {
	t.Helper()
	goBin := testreq.Tool(t, "go")
	bin := filepath.Join(t.TempDir(), "xpu-runtime-hook")
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// bundle makes a bundle whose rootfs is a glibc-looking image with a fake
// ldconfig and a fake sh that would leave a marker if ever run.
func bundle(t *testing.T) (dir, marker string) {
	t.Helper()
	dir = t.TempDir()
	root := filepath.Join(dir, "rootfs")
	marker = filepath.Join(t.TempDir(), "marker")
	evil := []byte("#!/bin/sh\ntouch " + marker + "\n")
	for _, p := range []string{"sbin/ldconfig", "usr/sbin/ldconfig", "bin/sh", "lib64/ld-linux-x86-64.so.2"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), evil, 0o755))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	// Our "library": the host's libc copy is a real ELF shared object.
	libc, err := os.ReadFile("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		testreq.Missing(t, "no host libc to use as a test library: %v", err)
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "opt/xpu/lib"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "opt/xpu/lib/libc.so.6"), libc, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"ociVersion":"1.0.0","root":{"path":"rootfs"}}`), 0o644))
	return dir, marker
}

func state(t *testing.T, bundleDir string) []byte {
	b, err := json.Marshal(map[string]any{"ociVersion": "1.0.0", "id": "c1", "status": "creating", "pid": 1, "bundle": bundleDir})
	require.NoError(t, err)
	return b
}

func TestBinaryContract(t *testing.T) {
	bin := buildHook(t)
	ef, err := elf.Open(bin)
	require.NoError(t, err)
	for _, p := range ef.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "the hook must be static: the dynamic loader never runs")
	}
	_ = ef.Close()

	dir, marker := bundle(t)
	noEtc, _ := bundle(t)
	libOnly, _ := bundle(t)
	require.NoError(t, os.Remove(filepath.Join(noEtc, "rootfs/etc")))
	tests := []struct {
		description string
		args        []string
		env         []string
		stdin       []byte
		wantCode    int
		wantStderr  string
		check       func(t *testing.T)
	}{
		{
			description: "update-ldcache",
			args:        []string{"update-ldcache", "--folder", "/opt/xpu/lib"},
			stdin:       state(t, dir),
			check: func(t *testing.T) {
				require.FileExists(t, filepath.Join(dir, "rootfs/etc/ld.so.cache"))
			},
		},
		{
			description: "folders from the environment",
			args:        []string{"update-ldcache"},
			env:         []string{"XPU_HOOK_FOLDERS=/opt/xpu/lib", "XPU_HOOK_LOG_LEVEL=debug"},
			stdin:       state(t, dir),
			wantStderr:  "level=debug",
		},
		{
			description: "create-symlinks",
			args:        []string{"--log-level", "warn", "create-symlinks", "--link", "libc.so.6::/opt/xpu/lib/libc.so", "--link", "../lib/x::/opt/xpu/bin/y"},
			stdin:       state(t, dir),
			check: func(t *testing.T) {
				l, err := os.Readlink(filepath.Join(dir, "rootfs/opt/xpu/lib/libc.so"))
				require.NoError(t, err)
				require.Equal(t, "libc.so.6", l)
			},
		},
		{
			description: "setup-libraries: the cache and the links in one process",
			args:        []string{"setup-libraries", "--folder", "/opt/xpu/lib", "--link", "libc.so.6::/opt/xpu/lib/libc-dev.so"},
			stdin:       state(t, dir),
			check: func(t *testing.T) {
				cache, err := os.ReadFile(filepath.Join(dir, "rootfs/etc/ld.so.cache"))
				require.NoError(t, err)
				require.Contains(t, string(cache), "/opt/xpu/lib/libc.so.6")
				l, err := os.Readlink(filepath.Join(dir, "rootfs/opt/xpu/lib/libc-dev.so"))
				require.NoError(t, err)
				require.Equal(t, "libc.so.6", l)
			},
		},
		{
			description: "setup-libraries: a library file alone",
			args:        []string{"setup-libraries", "--library", "/opt/xpu/lib/libc.so.6"},
			stdin:       state(t, libOnly),
			check: func(t *testing.T) {
				cache, err := os.ReadFile(filepath.Join(libOnly, "rootfs/etc/ld.so.cache"))
				require.NoError(t, err)
				require.Contains(t, string(cache), "/opt/xpu/lib/libc.so.6")
			},
		},
		{
			description: "setup-libraries without /etc still makes the links",
			args:        []string{"setup-libraries", "--folder", "/opt/xpu/lib", "--link", "libc.so.6::/opt/xpu/lib/libc-dev.so"},
			stdin:       state(t, noEtc),
			wantStderr:  "the container starts without this change",
			check: func(t *testing.T) {
				l, err := os.Readlink(filepath.Join(noEtc, "rootfs/opt/xpu/lib/libc-dev.so"))
				require.NoError(t, err)
				require.Equal(t, "libc.so.6", l)
			},
		},
		{
			description: "setup-libraries with nothing to do",
			args:        []string{"setup-libraries"},
			stdin:       state(t, dir),
			wantCode:    1,
			wantStderr:  "give at least one --folder, --library or --link TARGET::LINK",
		},
		{
			description: "unknown subcommand",
			args:        []string{"disable-device-node-modification"},
			stdin:       state(t, dir),
			wantStderr:  `unknown subcommand \"disable-device-node-modification\"`,
		},
		{
			description: "unknown flag",
			args:        []string{"update-ldcache", "--folder", "/opt/xpu/lib", "--new-flag", "x"},
			stdin:       state(t, dir),
			wantStderr:  "flag provided but not defined",
		},
		{
			description: "image without /etc",
			args:        []string{"update-ldcache", "--folder", "/opt/xpu/lib"},
			stdin:       state(t, noEtc),
			wantStderr:  "the container starts without this change",
		},
		{
			description: "malformed state",
			args:        []string{"update-ldcache", "--folder", "/opt/xpu/lib"},
			stdin:       []byte("{not json"),
			wantCode:    1,
			wantStderr:  "decoding container state",
		},
		{
			description: "missing bundle",
			args:        []string{"update-ldcache", "--folder", "/opt/xpu/lib"},
			stdin:       state(t, filepath.Join(dir, "nope")),
			wantCode:    1,
			wantStderr:  "config.json",
		},
		{
			description: "malformed link",
			args:        []string{"create-symlinks", "--link", "nolink"},
			stdin:       state(t, dir),
			wantCode:    1,
			wantStderr:  "want TARGET::LINK",
		},
		{
			description: "bad log level",
			args:        []string{"--log-level", "loud", "update-ldcache", "--folder", "/x"},
			stdin:       state(t, dir),
			wantCode:    1,
			wantStderr:  "--log-level",
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append([]string{"PATH=" + filepath.Join(dir, "rootfs/bin")}, tc.env...)
			cmd.Stdin = bytes.NewReader(tc.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantCode, code, "stderr: %s", stderr.String())
			require.Empty(t, stdout.String(), "nothing on stdout")
			require.Contains(t, stderr.String(), tc.wantStderr)
			require.NoFileExists(t, marker, "no program of the image may run")
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
}
