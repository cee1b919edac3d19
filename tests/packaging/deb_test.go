package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// defaultSpec is where the units and the purge look for the generated spec.
const defaultSpec = "/etc/cdi/baidu.com-xpu.yaml"

// snapshotRoots are compared before install and after purge.
var snapshotRoots = []string{"/usr", "/etc", "/var/run/cdi", "/lib/systemd", "/lib/udev"}

func TestDebLintian(t *testing.T) {
	p := packages(t)
	out, err := runErr(nil, "lintian", "--fail-on", "error", p.deb)
	require.NoError(t, err, "lintian:\n%s", out)
	require.NotRegexp(t, regexp.MustCompile(`(?m)^E: `), out, "lintian errors")
	t.Logf("lintian:\n%s", out)
}

// TestDebInstallRefreshPurge installs the .deb on this host, runs the
// installed refresh on a fake Kunlun host, then purges the package and
// checks that the file lists of /usr, /etc, /var/run/cdi and /lib/systemd
// are what they were before.
func TestDebInstallRefreshPurge(t *testing.T) {
	p := packages(t)
	requireTools(t, "dpkg", "systemd-analyze")
	claimDebHost(t)
	specOwned := false // whether this test may create and expect removal of the default spec
	if _, err := os.Lstat(defaultSpec); err != nil {
		specOwned = true
	}
	before := fileList(t, snapshotRoots...)
	host := fakeHost(t)
	out := filepath.Join(t.TempDir(), "cdi", "baidu.com-xpu.yaml")

	// No systemd runs here: postinst must write the spec itself when the
	// (fake) host has /dev/xpuctrl, using the environment dpkg passes on.
	dpkgInstall(t, []string{"XPU_DEV_ROOT=" + host, "XPU_DRIVER_ROOT=" + host, "XPU_CDI_OUTPUT=" + out}, p.deb)
	checkSpec(t, out, host)

	t.Run("payload", func(t *testing.T) {
		for _, b := range stagedBinaries(t, p) {
			fi, err := os.Stat(filepath.Join("/usr/bin", b))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), b)
			require.FileExists(t, filepath.Join("/usr/share/man/man1", b+".1.gz"))
		}
		version := run(t, nil, "/usr/bin/xpu-cdi", "--version")
		require.Contains(t, version, "xpu-cdi version")
		for _, f := range []string{
			"/lib/systemd/system/xpu-cdi-refresh.service",
			"/lib/systemd/system/xpu-cdi-refresh.path",
			"/lib/systemd/system/xpu-exporter.service",
			"/lib/systemd/system/xpu-cdi-partitions.service",
			"/lib/udev/rules.d/71-xpu-cdi.rules",
			"/etc/xpu-container-toolkit/config.toml",
			"/etc/xpu-cdi/partitions.conf",
			"/usr/share/doc/xpu-cdi/copyright",
		} {
			require.FileExists(t, f)
		}
		conffiles := run(t, nil, "dpkg-query", "--control-show", "xpu-cdi", "conffiles")
		require.Contains(t, conffiles, "/etc/xpu-container-toolkit/config.toml")
		require.Contains(t, conffiles, "/etc/xpu-cdi/partitions.conf")
		// deb-systemd-helper enabled the units (symlinks made without systemd running).
		for _, unit := range []string{"xpu-cdi-refresh.service", "xpu-cdi-refresh.path", "xpu-cdi-partitions.service"} {
			link := filepath.Join("/etc/systemd/system/multi-user.target.wants", unit)
			target, err := os.Readlink(link)
			require.NoError(t, err, "unit %s not enabled", unit)
			require.Equal(t, filepath.Join("/lib/systemd/system", unit), target)
		}
		// The exporter is shipped disabled.
		_, err := os.Lstat("/etc/systemd/system/multi-user.target.wants/xpu-exporter.service")
		require.ErrorIs(t, err, os.ErrNotExist, "xpu-exporter.service must be installed disabled")
	})

	t.Run("installed units verify", func(t *testing.T) {
		for _, unit := range []string{"xpu-cdi-refresh.service", "xpu-cdi-refresh.path", "xpu-exporter.service", "xpu-cdi-partitions.service"} {
			o, err := runErr([]string{"SYSTEMD_LOG_TARGET=console"}, "systemd-analyze", "verify", filepath.Join("/lib/systemd/system", unit))
			require.NoError(t, err, o)
			require.Empty(t, strings.TrimSpace(o), "systemd-analyze verify %s", unit)
		}
	})

	t.Run("installed refresh", func(t *testing.T) {
		// The command the service runs, with the service's environment
		// pointed at the fake host; then the host loses its XPUs.
		out2 := filepath.Join(t.TempDir(), "spec.yaml")
		env := []string{"XPU_DEV_ROOT=" + host, "XPU_DRIVER_ROOT=" + host, "XPU_CDI_OUTPUT=" + out2}
		run(t, env, "/usr/bin/xpu-cdi", "refresh")
		checkSpec(t, out2, host)
		empty := t.TempDir()
		run(t, []string{"XPU_DEV_ROOT=" + empty, "XPU_DRIVER_ROOT=" + empty, "XPU_CDI_OUTPUT=" + out2}, "/usr/bin/xpu-cdi", "refresh")
		require.NoFileExists(t, out2, "refresh on a host without XPU must remove the spec")
	})

	if specOwned {
		// The spec at its default place, as the service writes it: purge removes it.
		run(t, []string{"XPU_DEV_ROOT=" + host, "XPU_DRIVER_ROOT=" + host}, "/usr/bin/xpu-cdi", "refresh")
		require.FileExists(t, defaultSpec)
	} else {
		t.Logf("%s existed before the test: not touching it", defaultSpec)
	}

	run(t, nil, "dpkg", "--remove", "xpu-cdi")
	require.FileExists(t, "/etc/xpu-container-toolkit/config.toml", "remove keeps the conffile")
	require.FileExists(t, "/etc/xpu-cdi/partitions.conf", "remove keeps the conffile")
	require.NoFileExists(t, "/usr/bin/xpu-cdi")
	run(t, nil, "dpkg", "--purge", "xpu-cdi")
	require.NoError(t, os.Remove(installMarker))
	if specOwned {
		require.NoFileExists(t, defaultSpec, "purge must remove the generated spec")
	}

	after := fileList(t, snapshotRoots...)
	gone, left := diff(before, after)
	if specOwned {
		// The refresh above may have created /etc/cdi; it is the shared
		// CDI directory, which the purge leaves in place.
		left = without(left, "/etc/cdi")
	}
	require.Empty(t, left, "left behind after purge")
	require.Empty(t, gone, "removed by install/purge but not ours")
}

func without(list []string, drop string) []string {
	var out []string
	for _, x := range list {
		if x != drop {
			out = append(out, x)
		}
	}
	return out
}

// checkSpec reads the spec with the CDI library (which validates it) and
// checks that it offers the fake host's eight devices and its device nodes.
func checkSpec(t *testing.T, path, host string) {
	t.Helper()
	spec, err := cdi.ReadSpec(path, 0)
	require.NoError(t, err, "reading %s", path)
	require.Equal(t, "baidu.com", spec.GetVendor())
	require.Equal(t, "xpu", spec.GetClass())
	for _, name := range []string{"0", "7", "all"} {
		require.NotNil(t, spec.GetDevice(name), "device %q in %s", name, path)
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), filepath.Join(host, "dev", "xpuctrl"))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
}
