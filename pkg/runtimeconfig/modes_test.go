package runtimeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestCopiesKeepTheSourceMode: a file that carries a copy of an engine's
// configuration is no more readable than that configuration: the
// containerd 1.x drop-in (a copy of the CRI section, registry credentials
// included) of a 0600 config.toml, and the Docker revert record (the
// original daemon.json) of a 0600 daemon.json. A 0644 source still gives
// 0644 files.
func TestCopiesKeepTheSourceMode(t *testing.T) {
	const containerdMain = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"r.example\".auth]\nauth = \"c2VjcmV0\"\n"
	for _, mode := range []os.FileMode{0o600, 0o640, 0o644} {
		t.Run(mode.String(), func(t *testing.T) {
			root := t.TempDir()
			main := filepath.Join(root, DefaultContainerdConfig)
			writeFiles(t, root, files{DefaultContainerdConfig: containerdMain, DefaultDockerConfig: `{"log-level": "warn"}`})
			require.NoError(t, os.Chmod(main, mode))
			require.NoError(t, os.Chmod(filepath.Join(root, DefaultDockerConfig), mode))

			c, err := New(Containerd, append(rootedPaths(Containerd, root), WithRuntimePath("/usr/bin/xpu-container-runtime"))...)
			require.NoError(t, err)
			p, err := c.Configure()
			require.NoError(t, err)
			require.NoError(t, p.Apply())
			drop := filepath.Join(root, DefaultContainerdDropIn)
			b, err := os.ReadFile(drop)
			require.NoError(t, err)
			require.Contains(t, string(b), "c2VjcmV0", "containerd 1.x replaces the whole CRI section with the drop-in's: the copy is needed")
			requireMode(t, drop, mode)
			requireMode(t, main, mode)

			c, err = New(Docker, append(rootedPaths(Docker, root), WithRuntimePath("/usr/bin/xpu-container-runtime"))...)
			require.NoError(t, err)
			p, err = c.Configure()
			require.NoError(t, err)
			require.NoError(t, p.Apply())
			requireMode(t, filepath.Join(root, DefaultDockerConfig+recordSuffix), mode)
			requireMode(t, filepath.Join(root, DefaultDockerConfig), mode)
		})
	}
}

func requireMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, want, fi.Mode().Perm(), path)
}

// TestDropInDirectoryLinksRefused: a symbolic link anywhere in the drop-in's
// directory chain is refused, naming it, and nothing is written where it
// leads.
func TestDropInDirectoryLinksRefused(t *testing.T) {
	for _, link := range []string{"etc/crio/crio.conf.d", "etc/crio"} {
		t.Run(link, func(t *testing.T) {
			root := t.TempDir()
			elsewhere := t.TempDir()
			writeFiles(t, root, files{DefaultCRIOConfig: "[crio]\n"})
			p := filepath.Join(root, link)
			if link == "etc/crio" {
				require.NoError(t, os.Rename(p, filepath.Join(elsewhere, "crio")))
				require.NoError(t, os.Symlink(filepath.Join(elsewhere, "crio"), p))
			} else {
				require.NoError(t, os.Symlink(elsewhere, p))
			}
			before := snapshot(t, elsewhere)
			c, err := New(CRIO, append(rootedPaths(CRIO, root), WithRuntimePath("/usr/bin/xpu-container-runtime"))...)
			require.NoError(t, err)
			_, err = c.Configure()
			require.ErrorIs(t, err, ErrSymlink)
			require.ErrorContains(t, err, "its directory "+p+" is a symbolic link")
			_, err = c.Revert()
			require.ErrorIs(t, err, ErrSymlink)
			require.Equal(t, before, snapshot(t, elsewhere))
		})
	}
}

// TestOversizedOrBlockingConfigRefused: a configuration over MaxConfigSize
// is refused at once with the file and the bound named; a FIFO without a
// writer does not hang the command.
func TestOversizedOrBlockingConfigRefused(t *testing.T) {
	root := t.TempDir()
	main := filepath.Join(root, DefaultContainerdConfig)
	writeFiles(t, root, files{DefaultContainerdConfig: "version = 2\n" + strings.Repeat("k = 1\n", MaxConfigSize/6+1)})
	before := snapshot(t, root)
	c, err := New(Containerd, append(rootedPaths(Containerd, root), WithRuntimePath("/usr/bin/xpu-container-runtime"))...)
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Configure()
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, main)
	require.ErrorContains(t, err, "read up to 262144 bytes")
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, before, snapshot(t, root))

	require.NoError(t, os.Remove(main))
	require.NoError(t, unix.Mkfifo(main, 0o600))
	done := make(chan error, 1)
	go func() { _, err := c.Configure(); done <- err }()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "not a regular file")
	case <-time.After(10 * time.Second):
		t.Fatal("configure hangs on a FIFO config.toml")
	}
}
