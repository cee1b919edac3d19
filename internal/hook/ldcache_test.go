package hook

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/ldcache"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func TestUpdateLDCacheHostile(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libxpurt.so.1.0")
	buildLib(t, lib, "libxpurt.so.1")
	const folder = "/usr/lib/xpu"
	xpurt := "libxpurt.so.1=" + folder + "/libxpurt.so.1"

	// glibc lays out a glibc image with our library in folder.
	glibc := func(t *testing.T, root string) {
		copyFile(t, lib, filepath.Join(root, "lib64/ld-linux-x86-64.so.2")) // only its name matters
		copyFile(t, lib, filepath.Join(root, folder, "libxpurt.so.1.0"))
		require.NoError(t, os.Symlink("libxpurt.so.1.0", filepath.Join(root, folder, "libxpurt.so.1")))
	}
	tests := []struct {
		description string
		setup       func(t *testing.T, root, host string)
		folders     []string
		wantErr     error
		check       func(t *testing.T, root string)
	}{
		{
			description: "plain glibc image without a cache",
			setup: func(t *testing.T, root, _ string) {
				glibc(t, root)
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
			},
			check: func(t *testing.T, root string) {
				require.Equal(t, []string{xpurt}, names(readCache(t, filepath.Join(root, "etc/ld.so.cache"))))
				conf, err := os.ReadFile(filepath.Join(root, "etc/ld.so.conf.d", ConfName))
				require.NoError(t, err)
				require.Contains(t, string(conf), "\n"+folder+"\n")
			},
		},
		{
			description: "existing entries kept, ours first for the same name",
			setup: func(t *testing.T, root, _ string) {
				glibc(t, root)
				data, err := ldcache.Encode([]ldcache.Entry{
					{Name: "libxpurt.so.1", Path: "/usr/lib/old/libxpurt.so.1", Flags: 0x303},
					{Name: "libc.so.6", Path: "/lib/x86_64-linux-gnu/libc.so.6", Flags: 0x303},
				})
				require.NoError(t, err)
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, "etc/ld.so.cache"), data, 0o644))
			},
			check: func(t *testing.T, root string) {
				require.Equal(t, []string{xpurt, "libxpurt.so.1=/usr/lib/old/libxpurt.so.1", "libc.so.6=/lib/x86_64-linux-gnu/libc.so.6"},
					names(readCache(t, filepath.Join(root, "etc/ld.so.cache"))))
			},
		},
		{
			description: "/etc is an absolute symlink to the host's etc",
			setup: func(t *testing.T, root, host string) {
				glibc(t, root)
				require.NoError(t, os.Symlink(filepath.Join(host, "etc"), filepath.Join(root, "etc")))
			},
			wantErr: ErrNoEtc,
		},
		{
			description: "/etc is a relative symlink climbing out of the root",
			setup: func(t *testing.T, root, host string) {
				glibc(t, root)
				require.NoError(t, os.Symlink("../../../../../../../.."+host+"/etc", filepath.Join(root, "etc")))
			},
			wantErr: ErrNoEtc,
		},
		{
			description: "/etc is a symlink to a directory inside the root",
			setup: func(t *testing.T, root, _ string) {
				glibc(t, root)
				require.NoError(t, os.MkdirAll(filepath.Join(root, "realetc"), 0o755))
				require.NoError(t, os.Symlink("/realetc", filepath.Join(root, "etc")))
			},
			check: func(t *testing.T, root string) {
				require.Equal(t, []string{xpurt}, names(readCache(t, filepath.Join(root, "realetc/ld.so.cache"))))
			},
		},
		{
			description: "/etc/ld.so.conf.d is a symlink to the host",
			setup: func(t *testing.T, root, host string) {
				glibc(t, root)
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				require.NoError(t, os.Symlink(filepath.Join(host, "etc/ld.so.conf.d"), filepath.Join(root, "etc/ld.so.conf.d")))
			},
			check: func(t *testing.T, root string) {
				require.Equal(t, []string{xpurt}, names(readCache(t, filepath.Join(root, "etc/ld.so.cache"))))
			},
		},
		{
			description: "/etc/ld.so.cache is a symlink to the host's cache",
			setup: func(t *testing.T, root, host string) {
				glibc(t, root)
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				require.NoError(t, os.Symlink(filepath.Join(host, "etc/ld.so.cache"), filepath.Join(root, "etc/ld.so.cache")))
			},
			check: func(t *testing.T, root string) {
				fi, err := os.Lstat(filepath.Join(root, "etc/ld.so.cache"))
				require.NoError(t, err)
				require.True(t, fi.Mode().IsRegular(), "the symlink is replaced, not followed")
				require.Equal(t, []string{xpurt}, names(readCache(t, filepath.Join(root, "etc/ld.so.cache"))))
			},
		},
		{
			description: "library folder is a symlink to the host's library dir",
			setup: func(t *testing.T, root, host string) {
				copyFile(t, lib, filepath.Join(root, "lib64/ld-linux-x86-64.so.2"))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/lib"), 0o755))
				require.NoError(t, os.Symlink(filepath.Join(host, "libs"), filepath.Join(root, folder)))
			},
			check: func(t *testing.T, root string) {
				require.NoFileExists(t, filepath.Join(root, "etc/ld.so.cache"), "no library of the host may be listed")
			},
		},
		{
			description: "library folder is a symlink to /",
			setup: func(t *testing.T, root, _ string) {
				copyFile(t, lib, filepath.Join(root, "lib64/ld-linux-x86-64.so.2"))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/lib"), 0o755))
				require.NoError(t, os.Symlink("/", filepath.Join(root, folder)))
			},
			check: func(t *testing.T, root string) {
				require.NoFileExists(t, filepath.Join(root, "etc/ld.so.cache"))
			},
		},
		{
			description: "a library in the folder is a symlink to a host library",
			setup: func(t *testing.T, root, host string) {
				glibc(t, root)
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				require.NoError(t, os.Symlink(filepath.Join(host, "libs/libxpurt.so.1"), filepath.Join(root, folder, "libhost.so.1")))
			},
			check: func(t *testing.T, root string) {
				require.Equal(t, []string{xpurt}, names(readCache(t, filepath.Join(root, "etc/ld.so.cache"))))
			},
		},
		{
			description: "folder with .. components stays in the root",
			folders:     []string{"/../../../../" + folder},
			setup: func(t *testing.T, root, _ string) {
				glibc(t, root)
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
			},
			check: func(t *testing.T, root string) {
				require.Equal(t, []string{xpurt}, names(readCache(t, filepath.Join(root, "etc/ld.so.cache"))))
			},
		},
		{
			description: "musl image with a path file",
			setup: func(t *testing.T, root, _ string) {
				copyFile(t, lib, filepath.Join(root, "lib/ld-musl-x86_64.so.1"))
				copyFile(t, lib, filepath.Join(root, folder, "libxpurt.so.1"))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, "etc/ld-musl-x86_64.path"), []byte("/lib:/usr/lib"), 0o640))
			},
			check: func(t *testing.T, root string) {
				p := filepath.Join(root, "etc/ld-musl-x86_64.path")
				data, err := os.ReadFile(p)
				require.NoError(t, err)
				require.Equal(t, "/lib:/usr/lib\n"+folder+"\n", string(data))
				fi, err := os.Stat(p)
				require.NoError(t, err)
				require.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
				require.NoFileExists(t, filepath.Join(root, "etc/ld.so.cache"))
			},
		},
		{
			description: "musl image without a path file is left alone",
			setup: func(t *testing.T, root, _ string) {
				copyFile(t, lib, filepath.Join(root, "lib/ld-musl-x86_64.so.1"))
				copyFile(t, lib, filepath.Join(root, folder, "libxpurt.so.1"))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
			},
			check: func(t *testing.T, root string) {
				entries, err := os.ReadDir(filepath.Join(root, "etc"))
				require.NoError(t, err)
				require.Empty(t, entries)
			},
		},
		{
			description: "musl path file is a symlink to the host's",
			setup: func(t *testing.T, root, host string) {
				copyFile(t, lib, filepath.Join(root, "lib/ld-musl-x86_64.so.1"))
				copyFile(t, lib, filepath.Join(root, folder, "libxpurt.so.1"))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
				require.NoError(t, os.Symlink(filepath.Join(host, "etc/ld-musl-x86_64.path"), filepath.Join(root, "etc/ld-musl-x86_64.path")))
			},
		},
		{
			description: "image without any loader is left alone",
			setup: func(t *testing.T, root, _ string) {
				copyFile(t, lib, filepath.Join(root, folder, "libxpurt.so.1"))
				require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
			},
			check: func(t *testing.T, root string) {
				entries, err := os.ReadDir(filepath.Join(root, "etc"))
				require.NoError(t, err)
				require.Empty(t, entries)
			},
		},
		{
			description: "image without /etc",
			setup: func(t *testing.T, root, _ string) {
				glibc(t, root)
			},
			wantErr: ErrNoEtc,
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			host := hostTree(t, lib)
			root := t.TempDir()
			tc.setup(t, root, host)
			before := snapshot(t, host)
			folders := tc.folders
			if folders == nil {
				folders = []string{folder}
			}
			err := UpdateLDCache(openRoot(t, root), folders, Options{})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, before, snapshot(t, host), "nothing outside the root may change")
			if tc.check != nil {
				tc.check(t, root)
			}
		})
	}
}

func TestUpdateLDCacheIdempotent(t *testing.T) {
	root := t.TempDir()
	buildLib(t, filepath.Join(root, "opt/xpu/lib/libxpurt.so.1"), "libxpurt.so.1")
	copyFile(t, filepath.Join(root, "opt/xpu/lib/libxpurt.so.1"), filepath.Join(root, "lib64/ld-linux-x86-64.so.2"))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	r := openRoot(t, root)
	require.NoError(t, UpdateLDCache(r, []string{"/opt/xpu/lib"}, Options{}))
	inode := func(p string) uint64 {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(filepath.Join(root, p), &st))
		return st.Ino
	}
	cache, conf := inode("etc/ld.so.cache"), inode("etc/ld.so.conf.d/"+ConfName)
	require.NoError(t, UpdateLDCache(r, []string{"/opt/xpu/lib"}, Options{}))
	require.Equal(t, cache, inode("etc/ld.so.cache"), "an unchanged cache is not rewritten")
	require.Equal(t, conf, inode("etc/ld.so.conf.d/"+ConfName), "an unchanged conf is not rewritten")
}

// TestUpdateLDCacheReadOnly needs root to make a read-only bind mount.
func TestUpdateLDCacheReadOnly(t *testing.T) {
	testreq.Root(t, "a read-only bind mount")
	root := t.TempDir()
	buildLib(t, filepath.Join(root, "opt/xpu/lib/libxpurt.so.1"), "libxpurt.so.1")
	copyFile(t, filepath.Join(root, "opt/xpu/lib/libxpurt.so.1"), filepath.Join(root, "lib64/ld-linux-x86-64.so.2"))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	if err := unix.Mount(root, root, "", unix.MS_BIND, ""); err != nil {
		testreq.Missing(t, "bind-mounting %s: %v", root, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	require.NoError(t, unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""))
	log := &logtest.Recorder{}
	require.NoError(t, UpdateLDCache(openRoot(t, root), []string{"/opt/xpu/lib"}, Options{Log: log}),
		"a read-only root is the image's (or engine's) choice: warn and skip")
	require.Contains(t, log.Warnings(), "read-only file system")
}

// TestUpdateLDCacheLibraryFiles: a library file given alone (a system
// library directory, full of the image's own libraries) gets its entry
// and its directory in the conf file; the rest of the directory is not
// read, and a missing file is a warning.
func TestUpdateLDCacheLibraryFiles(t *testing.T) {
	root := t.TempDir()
	const sysDir = "/lib/x86_64-linux-gnu"
	buildLib(t, filepath.Join(root, "opt/xpu/so/libxpurt.so.2"), "libxpurt.so.2")
	buildLib(t, filepath.Join(root, sysDir, "libxpunvidia-ml.so.5.0"), "libxpunvidia-ml.so.1")
	require.NoError(t, os.Symlink("libxpunvidia-ml.so.5.0", filepath.Join(root, sysDir, "libxpunvidia-ml.so.1")))
	buildLib(t, filepath.Join(root, sysDir, "libimage.so.3"), "libimage.so.3") // the image's, not in its cache
	copyFile(t, filepath.Join(root, "opt/xpu/so/libxpurt.so.2"), filepath.Join(root, "lib64/ld-linux-x86-64.so.2"))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))

	log := &logtest.Recorder{}
	require.NoError(t, UpdateLDCache(openRoot(t, root), []string{"/opt/xpu/so"}, Options{LibraryFiles: []string{sysDir + "/libxpunvidia-ml.so.1", sysDir + "/libmissing.so.1", "/opt/xpu/so/libxpurt.so.2"}, Log: log}))

	require.ElementsMatch(t, []string{"libxpurt.so.2=/opt/xpu/so/libxpurt.so.2", "libxpunvidia-ml.so.1=" + sysDir + "/libxpunvidia-ml.so.1"},
		names(readCache(t, filepath.Join(root, "etc/ld.so.cache"))), "the folder's entries and the one file's; a file in a folder counts once")
	conf, err := os.ReadFile(filepath.Join(root, "etc/ld.so.conf.d", ConfName))
	require.NoError(t, err)
	require.Contains(t, string(conf), "\n/opt/xpu/so\n")
	require.Contains(t, string(conf), "\n"+sysDir+"\n", "an ldconfig the image runs later keeps the file")
	require.Contains(t, log.Warnings(), sysDir+"/libmissing.so.1")

	// A library file alone, without folders, is enough work for the hook.
	root2 := t.TempDir()
	buildLib(t, filepath.Join(root2, sysDir, "libxpunvidia-ml.so.1"), "libxpunvidia-ml.so.1")
	copyFile(t, filepath.Join(root2, sysDir, "libxpunvidia-ml.so.1"), filepath.Join(root2, "lib64/ld-linux-x86-64.so.2"))
	require.NoError(t, os.MkdirAll(filepath.Join(root2, "etc"), 0o755))
	require.NoError(t, UpdateLDCache(openRoot(t, root2), nil, Options{LibraryFiles: []string{sysDir + "/libxpunvidia-ml.so.1"}}))
	require.Equal(t, []string{"libxpunvidia-ml.so.1=" + sysDir + "/libxpunvidia-ml.so.1"}, names(readCache(t, filepath.Join(root2, "etc/ld.so.cache"))))
}
