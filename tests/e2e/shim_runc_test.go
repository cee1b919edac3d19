package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// runShim runs the shim wrapper like an engine runs runc; stdio is /dev/null
// and a file, so that runc's container init cannot hold a pipe open.
func runShim(t *testing.T, wrapper string, args ...string) (string, error) {
	t.Helper()
	errFile, err := os.CreateTemp(t.TempDir(), "stderr")
	require.NoError(t, err)
	defer errFile.Close()
	cmd := exec.Command(wrapper, args...)
	cmd.Stderr = errFile
	err = cmd.Run()
	msg, rerr := os.ReadFile(errFile.Name())
	require.NoError(t, rerr)
	return string(msg), err
}

// TestShimRuncParallel creates 50 containers at once through the shim with
// runc, each asking for its own pair of devices (by variable or by
// annotation), starts them and checks what each one sees.
func TestShimRuncParallel(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	wrapper, _ := shimRuntime(t, tree, "accept-envvar-when-unprivileged = true\n")
	rootfs := t.TempDir()
	require.NoError(t, os.Chmod(rootfs, 0o755))
	harness.BuildBusyboxRootfs(t, rootfs)
	state := t.TempDir()

	const n = 50
	type ctr struct {
		id, bundle, out string
		want            []int
	}
	ctrs := make([]ctr, n)
	for i := range ctrs {
		a, b := i%8, (i+3)%8
		c := ctr{id: fmt.Sprintf("xpu-shim-e2e-%d-%d", os.Getpid(), i), out: t.TempDir(), want: []int{min(a, b), max(a, b)}}
		script := []string{"sh", "-c", "{ " + listXPUs + "; } > /result/out.tmp && mv /result/out.tmp /result/out"}
		if i%2 == 0 {
			c.bundle = runcBundle(t, rootfs, c.out, script, []string{fmt.Sprintf("XPU_VISIBLE_DEVICES=%d,%d", a, b)}, nil)
		} else {
			c.bundle = runcBundle(t, rootfs, c.out, script, nil, map[string]string{
				"cdi.k8s.io/e2e_a": fmt.Sprintf("baidu.com/xpu=%d", a),
				"cdi.k8s.io/e2e_b": "baidu.com/xpu=" + tree.Devices[b].BDF,
			})
		}
		ctrs[i] = c
		t.Cleanup(func() { _ = exec.Command("runc", "--root", state, "delete", "--force", c.id).Run() })
	}

	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range ctrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ctrs[i]
			msg, err := runShim(t, wrapper, "--root", state, "--log", filepath.Join(c.out, "log.json"), "--log-format", "json",
				"create", "--bundle", c.bundle, c.id)
			if err != nil {
				errs[i] = fmt.Errorf("create %s: %w: %s", c.id, err, msg)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d parallel creates through the shim: %s", n, time.Since(start).Round(time.Millisecond))
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, c := range ctrs {
		msg, err := runShim(t, wrapper, "--root", state, "start", c.id)
		require.NoError(t, err, msg)
	}
	for _, c := range ctrs {
		out := filepath.Join(c.out, "out")
		require.Eventually(t, func() bool { _, err := os.Stat(out); return err == nil }, 30*time.Second, 20*time.Millisecond, "%s never wrote its result", c.id)
		data, err := os.ReadFile(out)
		require.NoError(t, err)
		nodes, env := parseNodes(t, string(data))
		wantNodes, wantEnv := expectWithVisible(tree, c.want...)
		require.Equal(t, wantNodes, nodes, c.id)
		require.Equal(t, wantEnv, env, c.id)
	}
}

// TestShimRuncBadInput: every failure leaves the bundle as it was and says
// what was wrong, on stderr and in the --log file.
func TestShimRuncBadInput(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	wrapper, _ := shimRuntime(t, tree, "")
	noRuntime, _ := shimRuntime(t, tree, "low-level-runtimes = [\"/nonexistent/runc\", \"no-such-runc\"]\n")
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	state := t.TempDir()

	for _, tc := range []struct {
		description string
		wrapper     string
		config      func(bundle string)
		want        []string
	}{
		{
			description: "unknown device name", wrapper: wrapper,
			want: []string{"unknown XPU device baidu.com/xpu=gpu7", validNames},
		},
		{
			description: "malformed config.json", wrapper: wrapper,
			config: func(bundle string) {
				p := filepath.Join(bundle, "config.json")
				data, err := os.ReadFile(p)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(p, data[:len(data)-10], 0o644))
			},
			want: []string{"parsing the bundle's OCI spec", "config.json", "unexpected end of JSON input"},
		},
		{
			description: "missing low-level runtime", wrapper: noRuntime,
			want: []string{"no low-level OCI runtime found", "/nonexistent/runc", "no-such-runc", "low-level-runtimes"},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			bundle := runcBundle(t, rootfs, "", []string{"true"}, nil, map[string]string{"cdi.k8s.io/e2e": "baidu.com/xpu=gpu7"})
			if tc.config != nil {
				tc.config(bundle)
			}
			before, err := os.ReadFile(filepath.Join(bundle, "config.json"))
			require.NoError(t, err)
			logFile := filepath.Join(t.TempDir(), "log.json")
			id := fmt.Sprintf("xpu-shim-bad-%d", os.Getpid())
			msg, err := runShim(t, tc.wrapper, "--root", state, "--log", logFile, "--log-format", "json", "create", "--bundle", bundle, id)
			require.Error(t, err)
			logData, lerr := os.ReadFile(logFile)
			require.NoError(t, lerr)
			for _, w := range tc.want {
				require.Contains(t, msg, w)
				require.Contains(t, string(logData), w)
			}
			after, err := os.ReadFile(filepath.Join(bundle, "config.json"))
			require.NoError(t, err)
			require.Equal(t, before, after, "the bundle changed")
			entries, err := os.ReadDir(bundle)
			require.NoError(t, err)
			require.Len(t, entries, 1, "nothing but config.json in the bundle")
			out, _ := exec.Command("runc", "--root", state, "list", "-q").Output()
			require.NotContains(t, strings.Fields(string(out)), id, "no container was created")
		})
	}
}
