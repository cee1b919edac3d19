package nodeinstall

import (
	"fmt"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

func TestCheckTrusted(t *testing.T) {
	const euid = 4242
	for _, tc := range []struct {
		description string
		st          dirInfo
		wantErr     string
	}{
		{description: "root's 0755", st: dirInfo{mode: unix.S_IFDIR | 0o755}},
		{description: "root's 0700", st: dirInfo{mode: unix.S_IFDIR | 0o700}},
		{description: "the installer's own user", st: dirInfo{uid: euid, gid: euid, mode: unix.S_IFDIR | 0o755}},
		{description: "another user's", st: dirInfo{uid: 1000, gid: 1000, mode: unix.S_IFDIR | 0o755}, wantErr: "/opt/x (owner 1000:1000, mode drwxr-xr-x (0755)): writable by someone other than root: owned by uid 1000"},
		{description: "group-writable", st: dirInfo{gid: 10, mode: unix.S_IFDIR | 0o775}, wantErr: "/opt/x (owner 0:10, mode drwxrwxr-x (0775)): writable by someone other than root: writable by its group"},
		{description: "world-writable", st: dirInfo{mode: unix.S_IFDIR | 0o757}, wantErr: "mode drwxr-xrwx (0757)"},
		{description: "sticky and world-writable, as /tmp", st: dirInfo{mode: unix.S_IFDIR | unix.S_ISVTX | 0o777}, wantErr: "mode drwxrwxrwt (1777)): writable by someone other than root: writable by everyone (sticky, as /tmp)"},
		{description: "setgid group-writable", st: dirInfo{mode: unix.S_IFDIR | unix.S_ISGID | 0o775}, wantErr: "drwxrwsr-x (2775)"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			err := checkTrusted("/opt/x", tc.st, euid)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrUntrustedDir)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// TestInstallRefusesUntrustedDirs: a directory on the way to the hook, the
// spec or the labels file that someone but root may write is refused, by
// the first InstallHook, before anything is written anywhere, naming the
// directory, its owner and its mode.
func TestInstallRefusesUntrustedDirs(t *testing.T) {
	const labelsFile = "/etc/kubernetes/node-feature-discovery/features.d/xpu-cdi"
	for _, tc := range []struct {
		description string
		root        bool
		setup       func(t *testing.T, tree *fakehost.Tree)
		wantErr     string
	}{
		{
			description: "a world-writable parent of the hook directory",
			setup:       func(t *testing.T, tree *fakehost.Tree) { mkdir(t, tree, "/opt", 0o777) },
			wantErr:     "hook directory /opt/xpu-cdi/bin (through %s/opt/xpu-cdi/bin): /opt (owner %s, mode drwxrwxrwx (0777)): writable by someone other than root",
		},
		{
			description: "a sticky world-writable hook directory, as /tmp",
			setup:       func(t *testing.T, tree *fakehost.Tree) { mkdir(t, tree, "/opt/xpu-cdi/bin", 0o1777) },
			wantErr:     "/opt/xpu-cdi/bin (owner %s, mode drwxrwxrwt (1777))",
		},
		{
			description: "another user's directory in a sticky parent",
			root:        true,
			setup: func(t *testing.T, tree *fakehost.Tree) {
				mkdir(t, tree, "/opt", 0o1777)
				mkdir(t, tree, "/opt/xpu-cdi", 0o755)
				require.NoError(t, os.Chown(tree.Path("/opt/xpu-cdi"), 65534, 65534))
			},
			wantErr: "/opt/xpu-cdi (owner 65534:65534) in the sticky directory /opt: writable by someone other than root",
		},
		{
			description: "another user's symlink in a sticky parent",
			root:        true,
			setup: func(t *testing.T, tree *fakehost.Tree) {
				mkdir(t, tree, "/opt", 0o1777)
				mkdir(t, tree, "/usr/lib/xpu", 0o755)
				require.NoError(t, os.Symlink("/usr/lib/xpu", tree.Path("/opt/xpu-cdi")))
				require.NoError(t, os.Lchown(tree.Path("/opt/xpu-cdi"), 65534, 65534))
			},
			wantErr: "/opt/xpu-cdi (owner 65534:65534) in the sticky directory /opt",
		},
		{
			description: "a group-writable hook directory",
			setup:       func(t *testing.T, tree *fakehost.Tree) { mkdir(t, tree, "/opt/xpu-cdi/bin", 0o775) },
			wantErr:     "/opt/xpu-cdi/bin (owner %s, mode drwxrwxr-x (0775))",
		},
		{
			description: "a symlink on the way to a world-writable directory",
			setup: func(t *testing.T, tree *fakehost.Tree) {
				mkdir(t, tree, "/scratch", 0o777)
				require.NoError(t, os.Symlink("/scratch", tree.Path("/opt")))
			},
			wantErr: "/scratch (owner %s, mode drwxrwxrwx (0777))",
		},
		{
			description: "a world-writable spec directory",
			setup:       func(t *testing.T, tree *fakehost.Tree) { mkdir(t, tree, "/run/cdi", 0o777) },
			wantErr:     "CDI spec directory /var/run/cdi (through %s/var/run/cdi): /run/cdi (owner %s, mode drwxrwxrwx (0777))",
		},
		{
			description: "a group-writable labels directory",
			setup: func(t *testing.T, tree *fakehost.Tree) {
				mkdir(t, tree, path.Dir(labelsFile), 0o755)
				mkdir(t, tree, "/etc/kubernetes", 0o775)
			},
			wantErr: "labels directory /etc/kubernetes/node-feature-discovery/features.d (through %s/etc/kubernetes/node-feature-discovery/features.d): /etc/kubernetes (owner %s, mode drwxrwxr-x (0775))",
		},
		{
			description: "a hook directory owned by another user",
			root:        true,
			setup: func(t *testing.T, tree *fakehost.Tree) {
				mkdir(t, tree, "/opt/xpu-cdi/bin", 0o755)
				require.NoError(t, os.Chown(tree.Path("/opt/xpu-cdi/bin"), 65534, 65534))
			},
			wantErr: "/opt/xpu-cdi/bin (owner 65534:65534, mode drwxr-xr-x (0755)): writable by someone other than root: owned by uid 65534",
		},
		{
			description: "a spec directory's parent owned by another user",
			root:        true,
			setup:       func(t *testing.T, tree *fakehost.Tree) { require.NoError(t, os.Chown(tree.Path("/run"), 1000, 0)) },
			wantErr:     "/run (owner 1000:0, mode drwxr-xr-x (0755))",
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			if tc.root {
				testreq.Root(t, "chown to another user")
			}
			tree := hostTree(t, fakehost.P800x8())
			tc.setup(t, tree)
			before := files(t, tree.Root)
			// The spec under /var/run: its directory is reached through the
			// host's /var/run -> /run link, which the checks follow.
			in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) {
				c.LabelsFile = labelsFile
				c.SpecPath = cdispec.LegacySpecPath
			})
			_, err := in.InstallHook()
			require.ErrorIs(t, err, ErrUntrustedDir)
			want := tc.wantErr
			owner := ownerOf(t, tree.Root)
			switch strings.Count(want, "%s") {
			case 1:
				want = strings.Replace(want, "%s", owner, 1)
			case 2:
				want = strings.Replace(strings.Replace(want, "%s", tree.Root, 1), "%s", owner, 1)
			}
			require.ErrorContains(t, err, want)
			require.Equal(t, before, files(t, tree.Root), "nothing written anywhere")
		})
	}
}

// mkdir makes the directory p of the tree (with its parents) and gives it
// mode, whatever the umask.
func mkdir(t *testing.T, tree *fakehost.Tree, p string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(tree.Path(p), 0o755))
	perm := mode.Perm()
	if mode&0o1000 != 0 {
		perm |= os.ModeSticky
	}
	require.NoError(t, os.Chmod(tree.Path(p), perm))
}

// ownerOf is "uid:gid" of p, as the errors show it.
func ownerOf(t *testing.T, p string) string {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(p, &st))
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

// TestInstallCreatesRootDirs: the directories Install creates are 0755
// whatever the umask, and root:root (as root) whatever a setgid parent
// would give.
func TestInstallCreatesRootDirs(t *testing.T) {
	tree := hostTree(t, fakehost.P800x8())
	mkdir(t, tree, "/opt", 0o755)
	asRoot := os.Geteuid() == 0
	if asRoot {
		require.NoError(t, os.Chown(tree.Path("/opt"), 0, 1234))
		require.NoError(t, os.Chmod(tree.Path("/opt"), 0o755|os.ModeSetgid))
	}
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	in := newInstaller(t, tree, &logtest.Recorder{})
	_, err := in.InstallHook()
	require.NoError(t, err)
	_, err = in.SyncSpec()
	require.NoError(t, err)
	for _, p := range []string{"/opt/xpu-cdi", "/opt/xpu-cdi/bin", "/etc/cdi"} {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(tree.Path(p), &st))
		require.Equal(t, uint32(0o755), st.Mode&0o7777, "%s: 0755 under umask 077, no setgid bit", p)
		if asRoot {
			require.Equal(t, [2]uint32{0, 0}, [2]uint32{st.Uid, st.Gid}, "%s: root:root", p)
		}
	}
}

// TestUninstallForgedMarker: uninstall removes only directories install
// creates (the hook directory, the spec's, their parents); a marker listing
// another directory removes nothing else, and a marker in a directory
// others can write is not read at all.
func TestUninstallForgedMarker(t *testing.T) {
	t.Run("a directory install does not create", func(t *testing.T) {
		tree := hostTree(t, fakehost.P800x8())
		mkdir(t, tree, "/etc/cni/net.d", 0o755)
		in := newInstaller(t, tree, &logtest.Recorder{})
		_, err := in.InstallHook()
		require.NoError(t, err)
		marker := tree.Path("/opt/xpu-cdi/bin/" + createdMarker)
		data, err := os.ReadFile(marker)
		require.NoError(t, err)
		require.Equal(t, "/opt\n/opt/xpu-cdi\n/opt/xpu-cdi/bin\n", string(data))
		require.NoError(t, os.WriteFile(marker, append(data, "/etc/cni/net.d\n/etc/cni\n/\n/opt/../etc\n"...), 0o644))
		log := &logtest.Recorder{}
		in = newInstaller(t, tree, log)
		require.NoError(t, in.Uninstall())
		require.DirExists(t, tree.Path("/etc/cni/net.d"))
		require.NoDirExists(t, tree.Path("/opt/xpu-cdi"), "what install created is removed")
		require.True(t, log.Has("lists /etc/cni/net.d, which is not a directory xpu-cdi install creates: left in place"), log.String())
	})
	t.Run("a marker in a directory others can write", func(t *testing.T) {
		tree := hostTree(t, fakehost.P800x8())
		mkdir(t, tree, "/etc/cni/net.d", 0o755)
		mkdir(t, tree, "/opt/hooks", 0o777)
		require.NoError(t, os.WriteFile(tree.Path("/opt/hooks/"+createdMarker), []byte("/opt/hooks\n"), 0o644))
		in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) { c.HookDir = "/opt/hooks" })
		err := in.Uninstall()
		require.ErrorIs(t, err, ErrUntrustedDir)
		require.ErrorContains(t, err, "not removing the directories listed in /opt/hooks/"+createdMarker)
		require.DirExists(t, tree.Path("/opt/hooks"))
		require.FileExists(t, tree.Path("/opt/hooks/"+createdMarker))
	})
	t.Run("a marker others can write", func(t *testing.T) {
		tree := hostTree(t, fakehost.P800x8())
		in := newInstaller(t, tree, &logtest.Recorder{})
		_, err := in.InstallHook()
		require.NoError(t, err)
		require.NoError(t, os.Chmod(tree.Path("/opt/xpu-cdi/bin/"+createdMarker), 0o666))
		err = in.Uninstall()
		require.ErrorIs(t, err, ErrUntrustedDir)
		require.DirExists(t, tree.Path("/opt/xpu-cdi/bin"))
	})
}

// TestInstallBelowStickyDir: a sticky world-writable directory (/tmp) is a
// safe parent for directories install creates in it, root's and 0755:
// nobody else can rename or remove them.
func TestInstallBelowStickyDir(t *testing.T) {
	tree := hostTree(t, fakehost.P800x8())
	mkdir(t, tree, "/tmp", 0o1777)
	in := newInstaller(t, tree, &logtest.Recorder{}, func(c *Config) { c.HookDir = "/tmp/xpu-cdi/bin" })
	_, err := in.InstallHook()
	require.NoError(t, err)
	require.FileExists(t, tree.Path("/tmp/xpu-cdi/bin/"+HookName))
	st, err := os.Stat(tree.Path("/tmp/xpu-cdi"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), st.Mode().Perm())
}
