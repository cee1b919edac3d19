package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/config"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// crioRuntimeConfig is the part of CRI-O's effective configuration (`crio
// config`, `crio status config`) that `xpu-cdi runtime configure --runtime
// crio` sets.
type crioRuntimeConfig struct {
	Crio struct {
		Runtime struct {
			DefaultRuntime string   `toml:"default_runtime"`
			CDISpecDirs    []string `toml:"cdi_spec_dirs"`
			Runtimes       map[string]struct {
				RuntimePath string `toml:"runtime_path"`
				RuntimeType string `toml:"runtime_type"`
			} `toml:"runtimes"`
		} `toml:"runtime"`
	} `toml:"crio"`
}

func parseCRIOConfig(t *testing.T, r harness.Result) crioRuntimeConfig {
	t.Helper()
	var c crioRuntimeConfig
	require.NoError(t, toml.Unmarshal([]byte(r.Stdout), &c), "parsing the output of %v", r.Args)
	return c
}

// crioRuntimeRoot is where CRI-O tells the OCI runtime of a handler without
// runtime_root to keep its state (its built-in default); the xpu handler
// the drop-in registers has none, so runc under the shim uses it.
const crioRuntimeRoot = "/run/crun"

// removeIfCreated removes the directory dir at cleanup when it did not
// exist before and is empty.
func removeIfCreated(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); err == nil {
		return
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
}

// TestRuntimeConfigCRIORunsShim: CRI-O 1.34 accepts the drop-in written by
// `xpu-cdi runtime configure --runtime crio` (its effective configuration,
// from `crio config` and from the running daemon, has the xpu handler and
// the CDI directories), runs a pod with runtime handler "xpu" through the
// shim; with --set-as-default a pod without a handler goes through the shim
// too; after --revert the effective configuration is the one before and the
// handler is gone.
func TestRuntimeConfigCRIORunsShim(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	// The shim's built-in low-level runtimes (names looked up on PATH), not
	// an absolute runc: the PATH that CRI-O hands to conmon and conmon to
	// the runtime of a handler without monitor_env must be enough.
	lowLevel, err := json.Marshal(config.Default().LowLevelRuntimes)
	require.NoError(t, err)
	// A test vendor for the shim's kind: CRI-O reads /etc/cdi and
	// /var/run/cdi once configured, where a real baidu.com spec may be.
	vendor := harness.UniqueVendor(t)
	xpu, logFile := shimRuntime(t, tree, fmt.Sprintf("low-level-runtimes = %s\nvendor = %q\n", lowLevel, vendor))
	removeIfCreated(t, crioRuntimeRoot)
	c := harness.NewCRIO(t)
	base := c.MustCrio(t, "config").Stdout
	baseRunning := c.MustCrio(t, "status", "--socket", c.Socket, "config").Stdout
	baseCfg := parseCRIOConfig(t, c.MustCrio(t, "config")).Crio.Runtime
	require.Equal(t, "runc", baseCfg.DefaultRuntime)
	require.Equal(t, []string{c.SpecDir()}, baseCfg.CDISpecDirs)
	require.NotContains(t, baseCfg.Runtimes, "xpu")
	dropIn := filepath.Join(c.ConfigDir, "99-xpu.conf")
	args := []string{"--runtime", "crio", "--drop-in-file", dropIn, "--runtime-path", xpu, "--cdi.enabled"}
	configureRuntime(t, args...)
	require.FileExists(t, dropIn)

	t.Run("crio config accepts the drop-in", func(t *testing.T) {
		r := c.MustCrio(t, "config")
		require.NotRegexp(t, `Runtime handler \\?"xpu\\?" is being ignored`, r.Stderr, "CRI-O dropped the xpu handler")
		cfg := parseCRIOConfig(t, r)
		require.Contains(t, cfg.Crio.Runtime.Runtimes, "xpu")
		require.Equal(t, xpu, cfg.Crio.Runtime.Runtimes["xpu"].RuntimePath)
		require.Equal(t, "oci", cfg.Crio.Runtime.Runtimes["xpu"].RuntimeType)
		// crio config comments out a value equal to CRI-O's default, and
		// /etc/cdi, /var/run/cdi is the default: the harness's own directory
		// (set in crio.conf) must be gone, replaced by the default.
		require.Nil(t, cfg.Crio.Runtime.CDISpecDirs, "cdi_spec_dirs is still the harness's:\n%s", r.Stdout)
		require.Contains(t, r.Stdout, "# cdi_spec_dirs = [\n# \t\"/etc/cdi\",\n# \t\"/var/run/cdi\",\n# ]\n")
		require.Equal(t, "runc", cfg.Crio.Runtime.DefaultRuntime, "without --set-as-default the default stays")
	})

	c.Restart(t)
	require.NotRegexp(t, `Runtime handler \\?"xpu\\?" is being ignored`, c.Log(), "CRI-O dropped the xpu handler")
	running := parseCRIOConfig(t, c.MustCrio(t, "status", "--socket", c.Socket, "config"))
	require.Equal(t, xpu, running.Crio.Runtime.Runtimes["xpu"].RuntimePath, "the running daemon must have the xpu handler")

	harness.PrepareCRI(t, c)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	image := c.ImportCRIImage(t, rootfs, "xpu-e2e-busybox")
	wantNodes, wantEnv := expectWithVisible(tree, 2, 5)

	t.Run("handler xpu goes through the shim", func(t *testing.T) {
		size := fileSize(t, logFile)
		nodes, env := parseNodes(t, criRun(t, c, image, "xpu", "xpu-handler", "2", "5"))
		require.Equal(t, wantNodes, nodes)
		require.Equal(t, wantEnv, env)
		requireShimLogged(t, logFile, size)
	})

	t.Run("a cdi.k8s.io annotation is CRI-O's own business", func(t *testing.T) {
		// CRI-O resolves cdi.k8s.io annotations itself from its
		// cdi_spec_dirs before any runtime runs: without a spec for the
		// kind there, the create fails and the shim is never asked.
		size := fileSize(t, logFile)
		r := harness.CRIRun(t, c, harness.CRIContainer{
			Name: "xpu-annotated", Image: image, Command: []string{"true"}, RuntimeHandler: "xpu",
			Annotations: map[string]string{"cdi.k8s.io/xpu": vendor + "/xpu=2"},
		})
		require.NotZero(t, r.ExitCode, r.String())
		require.Contains(t, r.Stderr, "unresolvable CDI devices "+vendor+"/xpu=2", r.String())
		require.Equal(t, size, fileSize(t, logFile), "the shim ran for a container CRI-O refused")
	})

	t.Run("handler runc does not", func(t *testing.T) {
		size := fileSize(t, logFile)
		nodes, env := parseNodes(t, criRun(t, c, image, "runc", "xpu-runc", "2", "5"))
		require.Empty(t, nodes, "runc must not give XPUs: the nodes above came from the shim")
		require.Empty(t, env)
		require.Equal(t, size, fileSize(t, logFile), "the shim ran for runtime handler runc")
	})

	t.Run("set as default", func(t *testing.T) {
		configureRuntime(t, append(args, "--set-as-default")...)
		require.Equal(t, "xpu", parseCRIOConfig(t, c.MustCrio(t, "config")).Crio.Runtime.DefaultRuntime)
		c.Restart(t)
		size := fileSize(t, logFile)
		nodes, env := parseNodes(t, criRun(t, c, image, "", "xpu-default", "2", "5"))
		require.Equal(t, wantNodes, nodes)
		require.Equal(t, wantEnv, env)
		requireShimLogged(t, logFile, size)
	})

	t.Run("revert", func(t *testing.T) {
		configureRuntime(t, append(args, "--revert")...)
		require.NoFileExists(t, dropIn)
		require.Equal(t, base, c.MustCrio(t, "config").Stdout, "revert must give back CRI-O's effective configuration")
		c.Restart(t)
		require.Equal(t, baseRunning, c.MustCrio(t, "status", "--socket", c.Socket, "config").Stdout,
			"the restarted CRI-O must run with the configuration it had before")
		nodes, _ := parseNodes(t, criRun(t, c, image, "", "xpu-reverted", "2", "5"))
		require.Empty(t, nodes, "the default runtime is runc again")
		r := c.Crictl(t, "runp", "--runtime", "xpu", writePodConfig(t, "xpu-unknown"))
		require.NotZero(t, r.ExitCode, r.String())
		require.Contains(t, r.Stderr, "failed to find runtime handler xpu", r.String())
	})
}

// runXPUCDI runs the xpu-cdi binary and returns its stdout, its stderr and
// the error of a non-zero exit.
func runXPUCDI(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(Binary(t, "xpu-cdi"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// TestRuntimeConfigCRIOBadInput: a drop-in that xpu-cdi did not write is
// never overwritten or removed; the error names it and CRI-O's effective
// configuration and its configuration directory stay as they were.
func TestRuntimeConfigCRIOBadInput(t *testing.T) {
	xpu := Binary(t, "xpu-container-runtime")
	var dropIn string
	c := harness.NewCRIO(t, harness.WithCRIOConfigEdit(func(t testing.TB, c *harness.CRIO) {
		dropIn = filepath.Join(c.ConfigDir, "99-xpu.conf")
		foreign := "# an administrator's own file\n[crio.runtime]\nlog_size_max = 65536\n"
		require.NoError(t, os.WriteFile(dropIn, []byte(foreign), 0o644))
	}))
	effective := c.MustCrio(t, "config").Stdout
	require.Contains(t, effective, "log_size_max = 65536", "CRI-O must read the administrator's drop-in")
	running := c.MustCrio(t, "status", "--socket", c.Socket, "config").Stdout
	require.Contains(t, running, "log_size_max = 65536", "the running CRI-O must have read it")
	before := snapshot(t, c.ConfigDir)

	for _, extra := range [][]string{nil, {"--set-as-default"}, {"--revert"}} {
		args := append([]string{"runtime", "configure", "--runtime", "crio", "--drop-in-file", dropIn, "--runtime-path", xpu}, extra...)
		_, stderr, err := runXPUCDI(t, args...)
		var exitErr *exec.ExitError
		require.True(t, errors.As(err, &exitErr), "xpu-cdi %v must fail: %v", args, err)
		require.Contains(t, stderr, dropIn, "the error must name the file")
		require.Contains(t, stderr, "not written by xpu-cdi")
		require.Equal(t, before, snapshot(t, c.ConfigDir), "xpu-cdi %v changed the configuration directory", args)
		require.Equal(t, effective, c.MustCrio(t, "config").Stdout, "xpu-cdi %v changed CRI-O's effective configuration", args)
	}
}

// TestRuntimeConfigCRIOMissingShim: a drop-in naming a shim that is not
// installed. xpu-cdi writes it (the shim may be installed later), CRI-O
// starts without the handler and says why, naming the path, and a pod
// asking for the handler is refused; revert gives back the configuration.
func TestRuntimeConfigCRIOMissingShim(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not-installed", "xpu-container-runtime")
	c := harness.NewCRIO(t)
	base := c.MustCrio(t, "config").Stdout
	args := []string{"--runtime", "crio", "--drop-in-file", filepath.Join(c.ConfigDir, "99-xpu.conf"), "--runtime-path", missing}
	configureRuntime(t, args...)
	c.Restart(t)
	require.Regexp(t, `Runtime handler \\?"xpu\\?" is being ignored due to: .*`+regexp.QuoteMeta(missing), c.Log(),
		"CRI-O must say that it dropped the handler, naming the missing binary")
	t.Logf("crio: %s", regexp.MustCompile(`.*xpu\\" is being ignored.*`).FindString(c.Log()))
	running := parseCRIOConfig(t, c.MustCrio(t, "status", "--socket", c.Socket, "config"))
	require.NotContains(t, running.Crio.Runtime.Runtimes, "xpu")
	r := c.Crictl(t, "runp", "--runtime", "xpu", writePodConfig(t, "xpu-missing"))
	require.NotZero(t, r.ExitCode, r.String())
	require.Contains(t, r.Stderr, "failed to find runtime handler xpu", r.String())
	_, err := os.Stat(filepath.Dir(missing))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing may create the missing shim's directory")

	configureRuntime(t, append(args, "--revert")...)
	require.Equal(t, base, c.MustCrio(t, "config").Stdout)
}

// TestRuntimeConfigCRIONoDropIn: with --no-drop-in xpu-cdi re-encodes
// CRI-O's main file in place; CRI-O reads the result (the xpu handler and
// every setting of the harness's file, or the daemon would not start with
// its private paths), and --revert gives back the file byte for byte.
func TestRuntimeConfigCRIONoDropIn(t *testing.T) {
	xpu := Binary(t, "xpu-container-runtime")
	c := harness.NewCRIO(t)
	orig, err := os.ReadFile(c.ConfigPath)
	require.NoError(t, err)
	base := c.MustCrio(t, "config").Stdout
	args := []string{"--runtime", "crio", "--config", c.ConfigPath, "--no-drop-in", "--runtime-path", xpu, "--set-as-default"}
	configureRuntime(t, args...)
	edited, err := os.ReadFile(c.ConfigPath)
	require.NoError(t, err)
	require.NotEqual(t, string(orig), string(edited))
	cfg := parseCRIOConfig(t, c.MustCrio(t, "config")).Crio.Runtime
	require.Equal(t, xpu, cfg.Runtimes["xpu"].RuntimePath)
	require.Equal(t, "xpu", cfg.DefaultRuntime)
	require.Equal(t, []string{c.SpecDir()}, cfg.CDISpecDirs, "the harness's own settings must survive the re-encoding")
	c.Restart(t)
	running := parseCRIOConfig(t, c.MustCrio(t, "status", "--socket", c.Socket, "config")).Crio.Runtime
	require.Equal(t, "xpu", running.DefaultRuntime)
	require.Equal(t, xpu, running.Runtimes["xpu"].RuntimePath)

	configureRuntime(t, append(args, "--revert")...)
	reverted, err := os.ReadFile(c.ConfigPath)
	require.NoError(t, err)
	require.Equal(t, string(orig), string(reverted), "revert must give back crio.conf byte for byte")
	require.Equal(t, base, c.MustCrio(t, "config").Stdout)
	leftovers, err := filepath.Glob(c.ConfigPath + ".*")
	require.NoError(t, err)
	require.Equal(t, []string{c.ConfigDir}, leftovers, "revert left files next to crio.conf (its revert record?)")
}
