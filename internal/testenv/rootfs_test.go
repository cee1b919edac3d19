package testenv

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func TestBuildBusyboxRootfs(t *testing.T) {
	testreq.Tool(t, HostBusybox)
	dir := t.TempDir()
	require.NoError(t, BuildBusyboxRootfs(dir))

	fi, err := os.Stat(filepath.Join(dir, "bin/busybox"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode().Perm()&0o111, "busybox must be executable")
	target, err := os.Readlink(filepath.Join(dir, "bin/sh"))
	require.NoError(t, err)
	require.Equal(t, "/bin/busybox", target)

	tmp, err := os.Stat(filepath.Join(dir, "tmp"))
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|os.ModeSticky|0o777, tmp.Mode())

	for _, tc := range []struct{ name, want string }{
		{"etc/passwd", etcPasswd},
		{"etc/group", etcGroup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, tc.name))
			require.NoError(t, err)
			require.Equal(t, tc.want, string(data))
		})
	}
	for _, f := range []string{"lib", "etc/ld.so.cache", "sbin/ldconfig"} {
		_, err := os.Lstat(filepath.Join(dir, f))
		require.ErrorIs(t, err, os.ErrNotExist, "a busybox root has no %s", f)
	}
}

func TestBuildGlibcRootfs(t *testing.T) {
	testreq.Tool(t, HostBusybox)
	loader, libc, err := HostGlibc()
	require.NoError(t, err)
	libm := filepath.Join(filepath.Dir(libc), "libm.so.6")
	if _, err := os.Stat(libm); err != nil {
		testreq.Missing(t, "host has no %s: %v", libm, err)
	}
	tests := []struct {
		description string
		extraLibs   []string
		want        []string
		wantErr     bool
	}{
		{description: "loader and libc", want: []string{loader, libc}},
		{description: "soname found next to libc", extraLibs: []string{"libm.so.6"}, want: []string{loader, libc, libm}},
		{description: "absolute host path", extraLibs: []string{libm}, want: []string{loader, libc, libm}},
		{description: "missing library", extraLibs: []string{"libxpu-cdi-no-such.so.1"}, wantErr: true},
		{description: "libc twice is refused, not overwritten", extraLibs: []string{"libc.so.6"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			err := BuildGlibcRootfs(dir, tc.extraLibs...)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			for _, p := range tc.want {
				host, err := os.ReadFile(p)
				require.NoError(t, err)
				inRoot, err := os.ReadFile(filepath.Join(dir, p))
				require.NoError(t, err)
				require.Equal(t, host, inRoot, "%s is a copy of the host's", p)
			}
			for _, f := range []string{"etc/ld.so.cache", "sbin/ldconfig"} {
				_, err := os.Lstat(filepath.Join(dir, f))
				require.ErrorIs(t, err, os.ErrNotExist)
			}
		})
	}
}

func TestBaseImageLibsAndLDCache(t *testing.T) {
	testreq.Tool(t, HostBusybox)
	dir := t.TempDir()
	require.NoError(t, BuildGlibcRootfs(dir))
	require.NoError(t, AddBaseImageLibs(dir), "libc.so.6, already in the root, is skipped")
	_, libc, err := HostGlibc()
	require.NoError(t, err)

	cache, err := WriteLDCache(dir)
	require.NoError(t, err)
	onDisk, err := os.ReadFile(filepath.Join(dir, "etc/ld.so.cache"))
	require.NoError(t, err)
	require.Equal(t, onDisk, cache)
	require.Contains(t, string(cache), "glibc-ld.so.cache", "the new cache format")

	// Every base library the host has is in the root and named in the cache.
	var found int
	for _, name := range baseImageLibs {
		host := filepath.Join(filepath.Dir(libc), name)
		if _, err := os.Stat(host); err != nil {
			continue
		}
		found++
		_, err := os.Stat(filepath.Join(dir, host))
		require.NoError(t, err)
		require.Contains(t, string(cache), name)
	}
	require.Greater(t, found, 1, "the host has more than libc of a base image")
	conf, err := os.ReadFile(filepath.Join(dir, "etc/ld.so.conf"))
	require.NoError(t, err)
	require.Equal(t, "include /etc/ld.so.conf.d/*.conf\n", string(conf))
}

// TestGlibcRootfsRunsHostProgram runs a dynamically linked host program
// chrooted in the root: the point of a glibc root.
func TestGlibcRootfsRunsHostProgram(t *testing.T) {
	testreq.Tool(t, HostBusybox)
	testreq.Root(t, "chroot")
	const prog = "/usr/bin/env"
	dir := t.TempDir()
	require.NoError(t, BuildGlibcRootfs(dir))
	require.NoError(t, CopyIntoRootfs(dir, prog, "/usr/bin/glibc-env"))
	cmd := exec.Command("/usr/bin/glibc-env", "XPU_TESTENV=ok", "/bin/sh", "-c", "echo $XPU_TESTENV")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: dir}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "ok\n", string(out))
}

func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.WriteFile(src, []byte("data"), 0o750))
	require.NoError(t, os.Chmod(src, 0o750)) // past the umask

	dst := filepath.Join(dir, "root/a/b/dst")
	require.NoError(t, CopyFile(src, dst))
	fi, err := os.Stat(dst)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o750), fi.Mode().Perm())

	// Never overwrites, nor writes through a symlink.
	require.Error(t, CopyFile(src, dst))
	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o644))
	link := filepath.Join(dir, "root/link")
	require.NoError(t, os.Symlink(victim, link))
	require.Error(t, CopyIntoRootfs(filepath.Join(dir, "root"), src, "/link"))
	data, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "keep", string(data))

	require.ErrorIs(t, CopyFile(filepath.Join(dir, "missing"), filepath.Join(dir, "x")), os.ErrNotExist)
}

func TestTar(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/hostname"), []byte("xpu\n"), 0o644))
	archive := filepath.Join(dir, "root.tar")
	require.NoError(t, Tar(root, archive))

	f, err := os.Open(archive)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Zero(t, h.Uid, h.Name)
		require.Zero(t, h.Gid, h.Name)
		names[h.Name] = true
	}
	require.Equal(t, map[string]bool{"./": true, "./etc/": true, "./etc/hostname": true}, names)

	require.Error(t, Tar(filepath.Join(dir, "missing"), filepath.Join(dir, "missing.tar")))
}
