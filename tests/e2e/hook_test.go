package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// glibcRootfs is a busybox rootfs with the host's loader and libc and the
// xpu-test program (linked against libxpurt.so.1) in /usr/bin.
func glibcRootfs(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	rootfs := filepath.Join(dir, "rootfs")
	harness.BuildGlibcRootfs(t, rootfs)
	require.NoError(t, fakehost.BuildTestProgram(filepath.Join(rootfs, "usr", "bin", "xpu-test"), fakehost.WithCacheDir(fakehosttest.CacheDir(t))))
	return rootfs
}

// TestHookMakesLibrariesLoadable is the point of xpu-runtime-hook: a glibc
// program linked against libxpurt.so.1 runs without LD_LIBRARY_PATH with
// the hooks, and cannot load the library without them.
func TestHookMakesLibrariesLoadable(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	rootfs := glibcRootfs(t)
	withHooks, noHooks := harness.UniqueVendor(t), harness.UniqueVendor(t)
	specHooks := GenerateSpec(t, tree, withHooks)
	specNoHooks := GenerateSpec(t, tree, noHooks, "--no-hooks")
	require.Contains(t, string(specHooks), "setup-libraries")
	require.NotContains(t, string(specNoHooks), "hooks:")

	t.Run("podman", func(t *testing.T) {
		p := harness.NewPodman(t)
		p.ImportImage(t, rootfs, "xpu-e2e-glibc")
		p.InstallSpec(t, specHooks, withHooks)
		p.InstallSpec(t, specNoHooks, noHooks)

		r := p.MustRun(t, "run", "--rm", "--device", withHooks+"/xpu=0", "xpu-e2e-glibc", "xpu-test")
		require.Contains(t, r.Stdout, "xpu devices: 1")

		r = p.Run(t, "run", "--rm", "--device", noHooks+"/xpu=0", "xpu-e2e-glibc", "xpu-test")
		require.NotZero(t, r.ExitCode, "without the hook the library must not load: %s", r)
		require.Contains(t, r.Stdout+r.Stderr, "libxpurt.so.1")

		// The development link and the loader configuration are there too.
		r = p.MustRun(t, "run", "--rm", "--device", withHooks+"/xpu=0", "xpu-e2e-glibc", "sh", "-c",
			"readlink /usr/local/xpu/lib64/libxpurt.so; cat /etc/ld.so.conf.d/00-xpu-cdi.conf")
		require.Contains(t, r.Stdout, "libxpurt.so.1\n")
		require.Contains(t, r.Stdout, "/usr/local/xpu/lib64")

		// A read-only root filesystem: the container still starts.
		r = p.MustRun(t, "run", "--rm", "--read-only", "--device", withHooks+"/xpu=0", "xpu-e2e-glibc", "ls", "/dev/xpu0")
		require.Contains(t, r.Stdout, "/dev/xpu0")

		// An image without glibc still starts.
		bb := t.TempDir()
		harness.BuildBusyboxRootfs(t, bb)
		p.ImportImage(t, bb, "xpu-e2e-bb")
		p.MustRun(t, "run", "--rm", "--device", withHooks+"/xpu=0", "xpu-e2e-bb", "true")
	})

	t.Run("containerd", func(t *testing.T) {
		c := harness.NewContainerd(t)
		ref := c.ImportImage(t, rootfs, "xpu-e2e-glibc")
		harness.InstallSpec(t, specHooks, withHooks)
		harness.InstallSpec(t, specNoHooks, noHooks)
		r := c.MustCtr(t, "run", "--rm", "--device", withHooks+"/xpu=0", ref, "xpu-hook-ok", "xpu-test")
		require.Contains(t, r.Stdout, "xpu devices: 1")
		r = c.Ctr(t, "run", "--rm", "--device", noHooks+"/xpu=0", ref, "xpu-hook-none", "xpu-test")
		require.NotZero(t, r.ExitCode, r.String())
	})
}

// snapshot records everything below dir (testenv.Snapshot) to prove a test
// changed nothing there.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	s, err := testenv.Snapshot(dir)
	require.NoError(t, err)
	return s
}

// hostDir makes a directory standing for a host directory an image tries to
// reach, with one file in it.
func hostDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "host-dir")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "ld.so.conf.d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "precious"), []byte("do not touch\n"), 0o644))
	return dir
}

// TestHookHostileImages runs real Podman with images shaped to make the
// hooks write outside their root. Nothing outside the root may change; the
// container either starts or fails with a clear error.
func TestHookHostileImages(t *testing.T) {
	tree := FakeHost(t, fakehost.P800x8())
	vendor := harness.UniqueVendor(t)
	p := harness.NewPodman(t)
	p.InstallSpec(t, GenerateSpec(t, tree, vendor), vendor)
	gcc := harness.RequiresTool(t, "gcc")

	for _, tc := range []struct {
		description string
		shape       func(t *testing.T, rootfs, host string)
		args        []string
		mustStart   bool
	}{
		{
			description: "/etc is a symlink to a host directory",
			shape: func(t *testing.T, rootfs, host string) {
				require.NoError(t, os.RemoveAll(filepath.Join(rootfs, "etc")))
				require.NoError(t, os.Symlink(host, filepath.Join(rootfs, "etc")))
			},
		},
		{
			description: "/etc/ld.so.conf.d is a relative symlink escaping the root",
			shape: func(t *testing.T, rootfs, host string) {
				rel, err := filepath.Rel(filepath.Join(rootfs, "etc"), filepath.Join(host, "ld.so.conf.d"))
				require.NoError(t, err)
				require.NoError(t, os.Symlink("../../../../../../../../../.."+rel[len(".."):], filepath.Join(rootfs, "etc", "ld.so.conf.d")))
			},
			mustStart: true,
		},
		{
			description: "/etc/ld.so.cache is a symlink to a host file",
			shape: func(t *testing.T, rootfs, host string) {
				require.NoError(t, os.Symlink(filepath.Join(host, "precious"), filepath.Join(rootfs, "etc", "ld.so.cache")))
			},
			mustStart: true,
		},
		{
			description: "the library folder's parent is a symlink to /",
			shape: func(t *testing.T, rootfs, _ string) {
				require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "local"), 0o755))
				require.NoError(t, os.Symlink("/", filepath.Join(rootfs, "usr", "local", "xpu")))
			},
		},
		{
			description: "the library folder is a symlink to a host directory",
			shape: func(t *testing.T, rootfs, host string) {
				require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "usr", "local", "xpu"), 0o755))
				require.NoError(t, os.Symlink(host, filepath.Join(rootfs, "usr", "local", "xpu", "lib64")))
			},
		},
		{
			description: "LD_PRELOAD and LD_LIBRARY_PATH point at the image's library",
			shape: func(t *testing.T, rootfs, host string) {
				src := filepath.Join(t.TempDir(), "evil.c")
				marker := filepath.Join(host, "PRELOAD-RAN")
				require.NoError(t, os.WriteFile(src, []byte(`#include <stdio.h>
__attribute__((constructor)) static void evil(void) { FILE *f = fopen("`+marker+`", "w"); if (f) fclose(f); }
`), 0o644))
				out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", filepath.Join(rootfs, "evil.so"), src).CombinedOutput()
				require.NoError(t, err, string(out))
			},
			args:      []string{"-e", "LD_PRELOAD=/proc/self/cwd/evil.so", "-e", "LD_LIBRARY_PATH=/proc/self/cwd"},
			mustStart: true,
		},
		{
			description: "the image ships its own ldconfig",
			shape: func(t *testing.T, rootfs, host string) {
				script := "#!/bin/sh\necho ran > " + filepath.Join(host, "LDCONFIG-RAN") + "\necho ran > /LDCONFIG-RAN\n"
				for _, p := range []string{"sbin/ldconfig", "sbin/ldconfig.real", "usr/sbin/ldconfig", "usr/bin/ldconfig"} {
					require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(rootfs, p)), 0o755))
					require.NoError(t, os.WriteFile(filepath.Join(rootfs, p), []byte(script), 0o755))
				}
			},
			mustStart: true,
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			rootfs := glibcRootfs(t)
			host := hostDir(t)
			tc.shape(t, rootfs, host)
			before := snapshot(t, host)

			args := append([]string{"run", "--rm", "--device", vendor + "/xpu=0"}, tc.args...)
			args = append(args, "--rootfs", rootfs, "/bin/sh", "-c", "ls /dev/xpu0; ls /LDCONFIG-RAN 2>/dev/null; true")
			r := p.Run(t, args...)
			if tc.mustStart {
				require.Zero(t, r.ExitCode, "the container must start: %s", r)
				require.Contains(t, r.Stdout, "/dev/xpu0")
			} else if r.ExitCode != 0 {
				require.NotEmpty(t, r.Stderr, "a failure must say why")
				t.Logf("refused (allowed): %s", r.Stderr)
			}
			require.NotContains(t, r.Stdout, "LDCONFIG-RAN", "the image's ldconfig must never run")
			require.NoFileExists(t, filepath.Join(rootfs, "LDCONFIG-RAN"))
			require.Equal(t, before, snapshot(t, host), "nothing outside the container root may change")
		})
	}
}
