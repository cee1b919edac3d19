package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRPMLint(t *testing.T) {
	p := packages(t)
	out, err := runErr(nil, "rpmlint", "-c", filepath.Join(repoRoot(t), "packaging", "rpm", "rpmlint.toml"), p.rpm)
	require.NoError(t, err, "rpmlint:\n%s", out)
	require.Regexp(t, regexp.MustCompile(`\b0 errors\b`), out)
	t.Logf("rpmlint:\n%s", out)
}

// TestRPMInstallRoot installs the .rpm into a temporary root and checks the payload.
func TestRPMInstallRoot(t *testing.T) {
	p := packages(t)
	requireTools(t, "rpm")
	root := t.TempDir()
	// Scriptlets need a shell in the root; TestMaintainerScriptsWithoutSystemd runs them.
	run(t, nil, "rpm", "--root", root, "--nodeps", "--noscripts", "-i", p.rpm)

	for _, b := range stagedBinaries(t, p) {
		fi, err := os.Stat(filepath.Join(root, "usr/bin", b))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), b)
		require.FileExists(t, filepath.Join(root, "usr/share/man/man1", b+".1.gz"))
	}
	for _, f := range []string{
		"usr/lib/systemd/system/xpu-cdi-refresh.service",
		"usr/lib/systemd/system/xpu-cdi-refresh.path",
		"usr/lib/systemd/system/xpu-exporter.service",
		"usr/lib/systemd/system/xpu-cdi-partitions.service",
		"usr/lib/systemd/system-preset/50-xpu-cdi.preset",
		"usr/lib/udev/rules.d/71-xpu-cdi.rules",
		"etc/xpu-container-toolkit/config.toml",
		"etc/xpu-cdi/partitions.conf",
	} {
		require.FileExists(t, filepath.Join(root, f))
	}
	staged, err := os.ReadFile(filepath.Join(p.stage, "config.toml"))
	require.NoError(t, err)
	installed, err := os.ReadFile(filepath.Join(root, "etc/xpu-container-toolkit/config.toml"))
	require.NoError(t, err)
	require.Equal(t, string(staged), string(installed))

	// %config(noreplace): rpm's file flags "c" (config) and "n" (noreplace).
	flags := run(t, nil, "rpm", "-qp", "--qf", `[%{FILENAMES} %{FILEFLAGS:fflags}\n]`, p.rpm)
	require.Contains(t, strings.Split(flags, "\n"), "/etc/xpu-container-toolkit/config.toml cn")
	require.Contains(t, strings.Split(flags, "\n"), "/etc/xpu-cdi/partitions.conf cn")

	// The installed database knows the package.
	require.Contains(t, run(t, nil, "rpm", "--root", root, "-q", "xpu-cdi"), "xpu-cdi-"+p.version+"-1")
}

// TestPayloadParity compares the files of the .deb and the .rpm. The
// differences allowed, and why:
//   - the .deb puts units, preset and udev rule under /lib (bookworm's
//     systemd and udev paths; merged /usr makes /lib the same as /usr/lib),
//     the .rpm under /usr/lib (%{_unitdir}, %{_udevrulesdir}): /lib is read
//     as /usr/lib;
//   - the .deb has /usr/share/doc/xpu-cdi/{copyright,changelog.gz}, which
//     Debian policy requires and rpm keeps in the package header, and
//     /usr/share/lintian/overrides/xpu-cdi (rpmlint's filters are not
//     shipped);
//   - directories: dpkg lists every directory it creates, the .rpm owns only
//     its own (/etc/xpu-container-toolkit, /usr/share/doc/xpu-cdi); only
//     files and symlinks are compared.
func TestPayloadParity(t *testing.T) {
	p := packages(t)
	requireTools(t, "rpm", "dpkg-deb")

	var deb []string
	for _, line := range strings.Split(run(t, nil, "dpkg-deb", "--contents", p.deb), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || strings.HasPrefix(fields[0], "d") {
			continue
		}
		path := strings.TrimPrefix(fields[5], ".")
		if strings.HasPrefix(path, "/lib/") {
			path = "/usr" + path
		}
		switch path {
		case "/usr/share/doc/xpu-cdi/copyright", "/usr/share/doc/xpu-cdi/changelog.gz", "/usr/share/lintian/overrides/xpu-cdi":
			continue
		}
		deb = append(deb, path)
	}
	var rpm []string
	for _, line := range strings.Split(run(t, nil, "rpm", "-qp", "--qf", `[%{FILEMODES:perms} %{FILENAMES}\n]`, p.rpm), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 || strings.HasPrefix(fields[0], "d") {
			continue
		}
		rpm = append(rpm, fields[1])
	}
	sort.Strings(deb)
	sort.Strings(rpm)
	require.NotEmpty(t, deb)
	require.Equal(t, deb, rpm, "payload of %s and %s", filepath.Base(p.deb), filepath.Base(p.rpm))
}
