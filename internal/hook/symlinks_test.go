package hook

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
)

func TestParseLink(t *testing.T) {
	tests := []struct {
		description string
		in          string
		want        Link
		wantErr     string
	}{
		{"relative target", "libxpurt.so.1::/usr/lib/libxpurt.so", Link{"libxpurt.so.1", "/usr/lib/libxpurt.so"}, ""},
		{"absolute target", "/usr/bin/xpu_smi::/usr/bin/xpu-smi", Link{"/usr/bin/xpu_smi", "/usr/bin/xpu-smi"}, ""},
		{"no separator", "a:/b", Link{}, "want TARGET::LINK"},
		{"empty target", "::/b", Link{}, "empty"},
		{"relative link", "a::b", Link{}, "must be absolute"},
		{"root link", "a::/..", Link{}, "is the root"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, err := ParseLink(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestCreateSymlinksHostile(t *testing.T) {
	tests := []struct {
		description string
		setup       func(t *testing.T, root, host string)
		link        func(host string) Link
		// wantWarn is in the warning of a link skipped because of the
		// image's layout (skipImageShaped).
		wantWarn string
		// want maps paths in the root to the link text they must hold
		// ("" for a regular file left alone).
		want map[string]string
	}{
		{
			description: "missing parent is created",
			link:        func(string) Link { return Link{"libxpurt.so.1", "/usr/lib/xpu/libxpurt.so"} },
			want:        map[string]string{"usr/lib/xpu/libxpurt.so": "libxpurt.so.1"},
		},
		{
			description: "parent is an absolute symlink to a host dir",
			setup: func(t *testing.T, root, host string) {
				require.NoError(t, os.Symlink(filepath.Join(host, "etc"), filepath.Join(root, "lnk")))
			},
			link:     func(string) Link { return Link{"x", "/lnk/evil"} },
			wantWarn: "/lnk", // a dangling symlink inside the root: skipped
		},
		{
			description: "parent is a relative symlink climbing out",
			setup: func(t *testing.T, root, host string) {
				require.NoError(t, os.Symlink("../../../../../../../.."+host+"/etc", filepath.Join(root, "lnk")))
			},
			link:     func(string) Link { return Link{"x", "/lnk/evil"} },
			wantWarn: "/lnk", // a dangling symlink inside the root: skipped
		},
		{
			description: "parent is a symlink to /",
			setup: func(t *testing.T, root, _ string) {
				require.NoError(t, os.Symlink("/", filepath.Join(root, "up")))
			},
			link: func(string) Link { return Link{"x", "/up/up/evil"} },
			want: map[string]string{"evil": "x"},
		},
		{
			description: "dot-dot components in the link path",
			link:        func(string) Link { return Link{"x", "/usr/../../../../../evil"} },
			want:        map[string]string{"evil": "x"},
		},
		{
			description: "existing identical link is kept",
			setup: func(t *testing.T, root, _ string) {
				require.NoError(t, os.Symlink("same", filepath.Join(root, "l")))
			},
			link: func(string) Link { return Link{"same", "/l"} },
			want: map[string]string{"l": "same"},
		},
		{
			description: "existing link to a host file is replaced, not followed",
			setup: func(t *testing.T, root, host string) {
				require.NoError(t, os.Symlink(filepath.Join(host, "etc/ld.so.cache"), filepath.Join(root, "l")))
			},
			link: func(string) Link { return Link{"new", "/l"} },
			want: map[string]string{"l": "new"},
		},
		{
			description: "absolute target naming a host path is only text",
			link:        func(host string) Link { return Link{host + "/etc/ld.so.cache", "/l"} },
			want:        map[string]string{"l": "HOST/etc/ld.so.cache"},
		},
		{
			description: "existing regular file is refused",
			setup: func(t *testing.T, root, _ string) {
				require.NoError(t, os.WriteFile(filepath.Join(root, "f"), []byte("keep"), 0o644))
			},
			link: func(string) Link { return Link{"x", "/f"} },
			want: map[string]string{"f": ""},
		},
		{
			description: "existing directory is refused",
			setup: func(t *testing.T, root, _ string) {
				require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
			},
			link: func(string) Link { return Link{"x", "/d"} },
			want: map[string]string{"d": ""},
		},
	}
	lib := filepath.Join(t.TempDir(), "libxpurt.so.1")
	buildLib(t, lib, "libxpurt.so.1")
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			host := hostTree(t, lib)
			root := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, root, host)
			}
			before := snapshot(t, host)
			log := &logtest.Recorder{}
			require.NoError(t, CreateSymlinks(openRoot(t, root), []Link{tc.link(host)}, Options{Log: log}))
			if tc.wantWarn != "" {
				require.Contains(t, log.Warnings(), tc.wantWarn)
			}
			require.Equal(t, before, snapshot(t, host), "nothing outside the root may change")
			for p, text := range tc.want {
				full := filepath.Join(root, replaceHost(p, host))
				fi, err := os.Lstat(full)
				require.NoError(t, err)
				if text == "" {
					require.Zero(t, fi.Mode()&os.ModeSymlink, "%s must not be replaced", p)
					continue
				}
				got, err := os.Readlink(full)
				require.NoError(t, err)
				require.Equal(t, replaceHost(text, host), got)
			}
			leftovers, err := filepath.Glob(filepath.Join(root, ".*.xpu-*"))
			require.NoError(t, err)
			require.Empty(t, leftovers, "no temporary links left behind")
		})
	}
}

func replaceHost(p, host string) string {
	if len(p) >= 4 && p[:4] == "HOST" {
		return host + p[4:]
	}
	return p
}

// TestCreateSymlinksConcurrent runs the hook of many containers that share
// one root directory at once (runc with the same rootfs for every bundle):
// each must succeed, and the links must be right.
func TestCreateSymlinksConcurrent(t *testing.T) {
	dir := t.TempDir()
	links := []Link{
		{Target: "libxpurt.so.1", Link: "/usr/local/xpu/lib64/libxpurt.so"},
		{Target: "libxpuml.so.1", Link: "/usr/local/xpu/lib64/libxpuml.so"},
	}
	const n = 32
	errs := make(chan error, n)
	for range n {
		go func() {
			root, err := rootfs.Open(dir)
			if err != nil {
				errs <- err
				return
			}
			defer root.Close()
			errs <- CreateSymlinks(root, links, Options{})
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	for _, l := range links {
		target, err := os.Readlink(filepath.Join(dir, l.Link))
		require.NoError(t, err)
		require.Equal(t, l.Target, target)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "usr/local/xpu/lib64"))
	require.NoError(t, err)
	require.Len(t, entries, 2, "no temporary link left behind")
}
