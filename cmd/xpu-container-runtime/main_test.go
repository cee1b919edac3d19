package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// buildShim builds the static binary the way the Makefile does.
func buildShim(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), program)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// fakeRuntime is a low-level runtime that records its argv (NUL separated)
// and environment, copies the bundle's config.json when given one, prints
// to stdout like runc state does, and exits with $FAKE_EXIT.
func fakeRuntime(t *testing.T, dir string) (path, record string) {
	t.Helper()
	path = filepath.Join(dir, "bin", "runc")
	record = filepath.Join(dir, "record")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	script := `#!/bin/sh
printf '%s\0' "$0" "$@" > ` + record + `.argv
env > ` + record + `.env
echo '{"ociVersion":"1.0.2"}'
exit ${FAKE_EXIT:-0}
`
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path, record
}

type result struct {
	stdout, stderr string
	code           int
}

func runShim(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}

func writeConfig(t *testing.T, dir, content string) string {
	t.Helper()
	p := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func writeBundle(t *testing.T, env ...string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	caps := []string{"CAP_CHOWN", "CAP_SYS_ADMIN"}
	spec := &oci.Spec{
		Version: oci.Version, Root: &oci.Root{Path: "rootfs"},
		Process: &oci.Process{
			Args: []string{"sh"}, Cwd: "/", Env: append([]string{"PATH=/bin"}, env...),
			Capabilities: &oci.LinuxCapabilities{Bounding: caps},
		},
		// Privileged: every device allowed, what engines write for
		// --privileged.
		Linux: &oci.Linux{Resources: &oci.LinuxResources{Devices: []oci.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}}},
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644))
	return dir, data
}

func TestPassThrough(t *testing.T) {
	bin := buildShim(t)
	dir := t.TempDir()
	rt, record := fakeRuntime(t, dir)
	goodConfig := writeConfig(t, dir, "low-level-runtimes = [\""+rt+"\"]\n")
	badConfig := filepath.Join(dir, "bad.toml")
	require.NoError(t, os.WriteFile(badConfig, []byte("low-level-runtime = [\"nope\"]\n"), 0o644))
	bundle, before := writeBundle(t) // asks for no XPU

	for _, tc := range []struct {
		description string
		config      string
		path        string
		args        []string
	}{
		{description: "state", config: goodConfig, args: []string{"--root", "/run/r", "state", "id"}},
		{description: "odd bytes kept", config: goodConfig, args: []string{"--log=/dev/null", "exec", "--env", "A=b c\td", "id", "", "ü"}},
		{description: "create without a request", config: goodConfig, args: []string{"--root", "/r", "create", "--bundle", bundle, "--pid-file", "/p", "id"}},
		{description: "run from the bundle cwd", config: goodConfig, args: []string{"run", "id"}},
		{description: "bad config, runtime from PATH", config: badConfig, path: filepath.Dir(rt), args: []string{"create", "-b", bundle, "id"}},
		{description: "missing config file", config: filepath.Join(dir, "missing.toml"), path: filepath.Dir(rt), args: []string{"delete", "--force", "id"}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			path := "/usr/bin:/bin"
			if tc.path != "" {
				path = tc.path + ":" + path
			}
			env := []string{"PATH=" + path, "XPU_CONTAINER_TOOLKIT_CONFIG=" + tc.config, "WEIRD=x\ny", "FAKE_EXIT=7"}
			cmd := exec.Command(bin, tc.args...)
			cmd.Env, cmd.Dir = env, bundle
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 7, ee.ExitCode(), "the runtime's exit status (exec, not fork): %s", stderr.String())
			require.Equal(t, "{\"ociVersion\":\"1.0.2\"}\n", stdout.String(), "stdout is the runtime's only")
			require.Empty(t, stderr.String())

			argv, err := os.ReadFile(record + ".argv")
			require.NoError(t, err)
			want := rt + "\x00" + strings.Join(tc.args, "\x00") + "\x00"
			require.Equal(t, want, string(argv))
			gotEnv, err := os.ReadFile(record + ".env")
			require.NoError(t, err)
			for _, e := range env {
				require.Contains(t, string(gotEnv), e+"\n")
			}
			after, err := os.ReadFile(filepath.Join(bundle, "config.json"))
			require.NoError(t, err)
			require.Equal(t, before, after)
		})
	}
}

func TestFailures(t *testing.T) {
	bin := buildShim(t)
	dir := t.TempDir()
	rt, record := fakeRuntime(t, dir)
	goodConfig := writeConfig(t, dir, "low-level-runtimes = [\""+rt+"\"]\nmode = \"jit\"\ndev-root = \""+filepath.Join(dir, "nohost")+"\"\n")
	badConfig := filepath.Join(dir, "bad.toml")
	require.NoError(t, os.WriteFile(badConfig, []byte("mode = \"fast\"\n"), 0o644))
	missingRT := writeConfig(t, t.TempDir(), "low-level-runtimes = [\"/nonexistent/runc\", \"no-such-runtime\"]\n")
	bundle, before := writeBundle(t, "XPU_VISIBLE_DEVICES=0")

	for _, tc := range []struct {
		description string
		config      string
		logFormat   string
		want        []string
	}{
		{
			description: "bad config with a request", config: badConfig, logFormat: "json",
			want: []string{"asks for XPUs (XPU_VISIBLE_DEVICES=0)", badConfig, `mode \"fast\"`},
		},
		{description: "no XPU on the host", config: goodConfig, logFormat: "text", want: []string{"discovering the XPUs of the host"}},
		{description: "missing low-level runtime", config: missingRT, logFormat: "json", want: []string{"no low-level OCI runtime found", "/nonexistent/runc", "no-such-runtime"}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			os.Remove(record + ".argv")
			logFile := filepath.Join(t.TempDir(), "log.json")
			env := []string{"PATH=" + filepath.Dir(rt) + ":/usr/bin:/bin", "XPU_CONTAINER_TOOLKIT_CONFIG=" + tc.config}
			r := runShim(t, bin, env, "--log", logFile, "--log-format", tc.logFormat, "create", "--bundle", bundle, "id")
			require.Equal(t, 1, r.code)
			require.Empty(t, r.stdout)
			require.True(t, strings.HasPrefix(r.stderr, program+": "), r.stderr)
			logData, err := os.ReadFile(logFile)
			require.NoError(t, err)
			for _, w := range tc.want {
				if tc.logFormat == "json" {
					require.Contains(t, string(logData), w)
				}
				require.Contains(t, strings.ReplaceAll(r.stderr, `\"`, `"`), strings.ReplaceAll(w, `\"`, `"`))
			}
			if tc.logFormat == "json" {
				var entry map[string]string
				require.NoError(t, json.Unmarshal(logData, &entry), string(logData))
				require.Equal(t, "error", entry["level"])
				require.Equal(t, strings.TrimSuffix(r.stderr, "\n"), entry["msg"])
			} else {
				require.Contains(t, string(logData), "level=error msg=")
			}
			require.NoFileExists(t, record+".argv", "the runtime must not run")
			after, err := os.ReadFile(filepath.Join(bundle, "config.json"))
			require.NoError(t, err)
			require.Equal(t, before, after)
		})
	}
}

// TestCreateGivesDevices runs the binary on a fake P800 host (root: real
// device nodes) and checks what the low-level runtime is handed.
func TestCreateGivesDevices(t *testing.T) {
	testreq.Root(t, "discovery stats real device nodes")
	bin := buildShim(t)
	dir := t.TempDir()
	tree := fakehosttest.Build(t, fakehost.P800x8())
	rt, record := fakeRuntime(t, dir)
	logFile := filepath.Join(dir, "shim.log")
	cfg := writeConfig(t, dir, "low-level-runtimes = [\""+rt+"\"]\nmode = \"jit\"\nlog-file = \""+logFile+"\"\nlog-level = \"debug\"\n")
	bundle, _ := writeBundle(t, "XPU_VISIBLE_DEVICES=3,0")
	env := []string{"PATH=/usr/bin:/bin", "XPU_CONTAINER_TOOLKIT_CONFIG=" + cfg, "XPU_DEV_ROOT=" + tree.Root, "XPU_DRIVER_ROOT=" + tree.Root}
	r := runShim(t, bin, env, "--root", "/r", "create", "--bundle", bundle, "id")
	require.Zero(t, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Equal(t, "{\"ociVersion\":\"1.0.2\"}\n", r.stdout)

	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	require.NoError(t, err)
	var spec oci.Spec
	require.NoError(t, json.Unmarshal(data, &spec))
	require.Contains(t, spec.Process.Env, "XPU_VISIBLE_DEVICES=0,3")
	var nodes []string
	for _, d := range spec.Linux.Devices {
		nodes = append(nodes, d.Path)
	}
	require.ElementsMatch(t, []string{"/dev/xpuctrl", "/dev/xpu0", "/dev/xpu3"}, nodes)
	argv, err := os.ReadFile(record + ".argv")
	require.NoError(t, err)
	require.Equal(t, rt+"\x00--root\x00/r\x00create\x00--bundle\x00"+bundle+"\x00id\x00", string(argv))
	logData, err := os.ReadFile(logFile)
	require.NoError(t, err)
	require.Contains(t, string(logData), "gave XPUs 0,3 (jit mode")
}
