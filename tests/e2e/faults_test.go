package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// smallTmpfs mounts a tmpfs of size bytes on a new directory until the
// test ends.
func smallTmpfs(t *testing.T, size int) string {
	t.Helper()
	harness.RequiresRoot(t)
	dir := t.TempDir()
	require.NoError(t, unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fill writes a file in dir until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	// What a page-granular tmpfs still takes of a partial write.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
}

// entries lists the names in dir other than the filler.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range list {
		if e.Name() != "filler" {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestFullFileSystem: every file the project writes on a host, written on
// a full file system, fails with a clear error and leaves the previous file
// byte for byte and no temporary file.
func TestFullFileSystem(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	xpuCDI := Binary(t, "xpu-cdi")
	hostArgs := []string{"--dev-root", tree.Root, "--driver-root", tree.Root, "--hook-path", Binary(t, "xpu-runtime-hook")}

	for _, tc := range []struct {
		description string
		name        string // file kept in the full file system
		old         string
		args        func(path string) []string
	}{
		{
			description: "generate --output", name: "spec.yaml", old: "old spec\n",
			args: func(p string) []string { return append([]string{"generate", "--output", p}, hostArgs...) },
		},
		{
			description: "refresh", name: "baidu.com-xpu.yaml", old: "old spec\n",
			args: func(p string) []string { return append([]string{"refresh", "--output", p}, hostArgs...) },
		},
		{
			description: "runtime configure (docker, in place)", name: "daemon.json", old: "{\"log-level\": \"warn\"}\n",
			args: func(p string) []string {
				return []string{"runtime", "configure", "--runtime", "docker", "--mode", "shim", "--config", p}
			},
		},
		{
			description: "runtime configure (podman drop-in)", name: "99-xpu.conf", old: "",
			args: func(p string) []string {
				return []string{"runtime", "configure", "--runtime", "podman", "--config", filepath.Join(filepath.Dir(p), "containers.conf"), "--drop-in-file", p}
			},
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir := smallTmpfs(t, 64<<10)
			path := filepath.Join(dir, tc.name)
			if tc.old != "" {
				require.NoError(t, os.WriteFile(path, []byte(tc.old), 0o644))
			}
			before := entries(t, dir)
			fill(t, dir)
			cmd := exec.Command(xpuCDI, tc.args(path)...)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "%s", out)
			require.Contains(t, string(out), "no space left on device", "the error says why")
			require.Contains(t, string(out), path, "the error names the file")
			if tc.old != "" {
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				require.Equal(t, tc.old, string(data), "the previous file is intact")
			}
			require.Equal(t, before, entries(t, dir), "no temporary file or revert record is left")
			t.Logf("%s", bytes.TrimSpace(out))
		})
	}

	t.Run("runtime configure (docker), room for the revert record only", func(t *testing.T) {
		dir := smallTmpfs(t, 64<<10)
		path := filepath.Join(dir, "daemon.json")
		old := "{\"log-level\": \"warn\"}\n"
		require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
		fill(t, dir)
		// One page free: the record (written first) fits, daemon.json not.
		filler := filepath.Join(dir, "filler")
		fi, err := os.Stat(filler)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(filler, (fi.Size()/4096-1)*4096))
		out, err := exec.Command(xpuCDI, "runtime", "configure", "--runtime", "docker", "--mode", "shim", "--config", path).CombinedOutput()
		require.Error(t, err, "%s", out)
		require.Contains(t, string(out), "no space left on device")
		require.Contains(t, string(out), path+" (left as it was)", "the failure is the main file's")
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, old, string(data))
		require.Equal(t, []string{"daemon.json"}, entries(t, dir), "the revert record written first is taken back")
		t.Logf("%s", bytes.TrimSpace(out))
	})

	t.Run("shim config.json rewrite", func(t *testing.T) {
		wrapper, _ := shimRuntime(t, tree, "")
		rootfs := t.TempDir()
		harness.BuildBusyboxRootfs(t, rootfs)
		src := runcBundle(t, rootfs, "", []string{"true"}, nil, map[string]string{"cdi.k8s.io/e2e": "baidu.com/xpu=0"})
		bundle := smallTmpfs(t, 64<<10)
		old, err := os.ReadFile(filepath.Join(src, "config.json"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(bundle, "config.json"), old, 0o644))
		fill(t, bundle)
		state := t.TempDir()
		id := fmt.Sprintf("xpu-full-%d", os.Getpid())
		t.Cleanup(func() { _ = exec.Command("runc", "--root", state, "delete", "--force", id).Run() })
		msg, err := runShim(t, wrapper, "--root", state, "create", "--bundle", bundle, id)
		require.Error(t, err)
		require.Contains(t, msg, "no space left on device")
		require.Contains(t, msg, "config.json")
		after, err := os.ReadFile(filepath.Join(bundle, "config.json"))
		require.NoError(t, err)
		require.Equal(t, old, after, "config.json is intact")
		require.Equal(t, []string{"config.json"}, entries(t, bundle))
		out, _ := exec.Command("runc", "--root", state, "list", "-q").Output()
		require.NotContains(t, string(out), id, "runc was not run")
	})
}

// TestKilledWrites kills writers at random points of their write, many
// times: the file is always the old or the new content, never a mix, and a
// later run of the same command succeeds.
func TestKilledWrites(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	xpuCDI := Binary(t, "xpu-cdi")
	hostArgs := []string{"--dev-root", tree.Root, "--driver-root", tree.Root, "--hook-path", Binary(t, "xpu-runtime-hook")}
	const rounds = 300

	t.Run("generate --output", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "spec.json")
		gen := func(extra ...string) *exec.Cmd {
			return exec.Command(xpuCDI, append(append([]string{"generate", "--output", path}, hostArgs...), extra...)...)
		}
		require.NoError(t, gen("--no-hooks").Run())
		a, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, gen().Run())
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NotEqual(t, a, b)
		killed := killRounds(t, rounds, func(i int) *exec.Cmd {
			if i%2 == 0 {
				return gen("--no-hooks")
			}
			return gen()
		}, func() {
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(got, a) || bytes.Equal(got, b), "a mix of old and new: %q", got)
			_, err = cdispec.Parse(got)
			require.NoError(t, err)
		})
		t.Logf("%d generate runs, %d killed mid-run, the spec always whole", rounds, killed)
	})

	t.Run("runtime configure docker", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "daemon.json")
		orig := []byte("{\"log-level\": \"warn\"}\n")
		require.NoError(t, os.WriteFile(path, orig, 0o644))
		run := func(revert bool) *exec.Cmd {
			args := []string{"runtime", "configure", "--runtime", "docker", "--mode", "shim", "--config", path}
			if revert {
				args = append(args, "--revert")
			}
			return exec.Command(xpuCDI, args...)
		}
		require.NoError(t, run(false).Run())
		configured, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, run(true).Run())
		killed := killRounds(t, rounds, func(i int) *exec.Cmd { return run(i%2 == 1) }, func() {
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(got, orig) || bytes.Equal(got, configured), "a mix: %q", got)
			require.True(t, json.Valid(got))
		})
		// Whatever state the kills left, a revert gives back the original.
		require.NoError(t, run(true).Run())
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, string(orig), string(got))
		t.Logf("%d configure/revert runs, %d killed mid-run, daemon.json always whole, reverted to the original", rounds, killed)
	})
}

// TestKilledShim kills the shim at random points of a create, many times:
// the bundle's config.json is always the engine's or the shim's whole
// rewrite of it. The low-level runtime is true(1): only the rewrite counts.
func TestKilledShim(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	wrapper, _ := shimRuntime(t, tree, "low-level-runtimes = [\"true\"]\n")
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	bundle := runcBundle(t, rootfs, "", []string{"true"}, nil, map[string]string{"cdi.k8s.io/e2e": "baidu.com/xpu=0"})
	path := filepath.Join(bundle, "config.json")
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	create := func(int) *exec.Cmd {
		require.NoError(t, os.WriteFile(path, old, 0o644))
		return exec.Command(wrapper, "create", "--bundle", bundle, "xpu-killed")
	}
	require.NoError(t, create(0).Run())
	rewritten, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEqual(t, old, rewritten)
	const rounds = 300
	leftovers := 0
	killed := killRounds(t, rounds, create, func() {
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.True(t, bytes.Equal(got, old) || bytes.Equal(got, rewritten), "a mix: %q", got)
		list, err := os.ReadDir(bundle)
		require.NoError(t, err)
		for _, e := range list {
			// A kill between create and rename leaves the temporary file
			// (no process remains to remove it); never a partial config.json.
			require.True(t, e.Name() == "config.json" || strings.HasPrefix(e.Name(), ".config.json.tmp"), e.Name())
			if e.Name() != "config.json" {
				leftovers++
				require.NoError(t, os.Remove(filepath.Join(bundle, e.Name())))
			}
		}
	})
	t.Logf("%d shim creates, %d killed mid-run, config.json always whole, %d temporary files left by a kill", rounds, killed, leftovers)
}

// killRounds runs mk(i) rounds times, each killed (SIGKILL) after a random
// delay within the command's usual run time, and calls check after each.
// It returns how many runs the kill interrupted.
func killRounds(t *testing.T, rounds int, mk func(int) *exec.Cmd, check func()) int {
	t.Helper()
	start := time.Now()
	require.NoError(t, mk(0).Run())
	usual := time.Since(start)
	killed := 0
	rng := rand.New(rand.NewPCG(14, uint64(rounds)))
	for i := range rounds {
		cmd := mk(i)
		require.NoError(t, cmd.Start())
		time.Sleep(time.Duration(rng.Int64N(int64(usual) + 1)))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
			killed++
		}
		check()
	}
	return killed
}

// TestShimCreatesDuringRefresh creates 200 containers through the shim (cdi
// mode, runc create and delete) while `xpu-cdi refresh` rewrites the spec
// in a loop (with and without hooks, so the content changes every time):
// every container gets exactly the device it asked for, and no create
// fails.
func TestShimCreatesDuringRefresh(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	specDir := t.TempDir()
	require.NoError(t, os.Chmod(specDir, 0o755))
	specPath := filepath.Join(specDir, "baidu.com-xpu.yaml")
	xpuCDI := Binary(t, "xpu-cdi")
	refresh := func(noHooks bool) error {
		args := []string{"refresh", "--output", specPath, "--dev-root", tree.Root, "--driver-root", tree.Root, "--hook-path", Binary(t, "xpu-runtime-hook")}
		if noHooks {
			args = append(args, "--no-hooks")
		}
		out, err := exec.Command(xpuCDI, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("refresh: %w: %s", err, out)
		}
		return nil
	}
	require.NoError(t, refresh(false))
	wrapper, _ := shimRuntime(t, tree, fmt.Sprintf("mode = \"cdi\"\nspec-dirs = [%q]\n", specDir))
	rootfs := t.TempDir()
	require.NoError(t, os.Chmod(rootfs, 0o755))
	harness.BuildBusyboxRootfs(t, rootfs)
	state := t.TempDir()

	stop := make(chan struct{})
	var refreshes atomic.Int64
	refreshErr := make(chan error, 1)
	go func() {
		defer close(refreshErr)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := refresh(i%2 == 0); err != nil {
				refreshErr <- err
				return
			}
			refreshes.Add(1)
		}
	}()

	const n, parallel = 200, 4
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	sem := make(chan struct{}, parallel)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = createAndCheck(t, wrapper, state, rootfs, tree, i)
		}()
	}
	wg.Wait()
	close(stop)
	elapsed := time.Since(start)
	require.NoError(t, <-refreshErr)
	var failed []string
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err.Error())
		}
	}
	require.Empty(t, failed, "%d of %d creates failed:\n%s", len(failed), n, strings.Join(failed, "\n"))
	require.Greater(t, refreshes.Load(), int64(10), "the spec was rewritten throughout")
	t.Logf("%d creates through the shim (%d at a time) in %s while refresh rewrote the spec %d times: each container got exactly its device",
		n, parallel, elapsed.Round(time.Millisecond), refreshes.Load())
}

// createAndCheck creates container i (asking for device i%8 by annotation)
// through the shim, checks the devices runc was given and deletes it.
func createAndCheck(t *testing.T, wrapper, state, rootfs string, tree *fakehost.Tree, i int) error {
	dev := i % 8
	bundle := runcBundle(t, rootfs, "", []string{"true"}, nil, map[string]string{"cdi.k8s.io/e2e": fmt.Sprintf("baidu.com/xpu=%d", dev)})
	id := fmt.Sprintf("xpu-refresh-%d-%d", os.Getpid(), i)
	defer func() { _ = exec.Command("runc", "--root", state, "delete", "--force", id).Run() }()
	msg, err := runShim(t, wrapper, "--root", state, "create", "--bundle", bundle, id)
	if err != nil {
		return fmt.Errorf("create %s: %w: %s", id, err, msg)
	}
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return err
	}
	var spec oci.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	got := map[string]string{}
	for _, d := range spec.Linux.Devices {
		if strings.HasPrefix(d.Path, "/dev/xpu") {
			if _, dup := got[d.Path]; dup {
				return fmt.Errorf("%s: %s twice", id, d.Path)
			}
			got[d.Path] = fmt.Sprintf("%d:%d", d.Major, d.Minor)
		}
	}
	want, _ := expect(tree, dev)
	if !maps.Equal(got, want) {
		return fmt.Errorf("%s asked for xpu%d and got %v (want %v)", id, dev, got, want)
	}
	return nil
}
