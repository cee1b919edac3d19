package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// TestMaintainerScriptsWithoutSystemd runs the .deb's postinst/prerm/postrm
// and the .rpm's %post/%preun/%postun as in a container: no systemd running
// (this host has no /run/systemd/system) and a PATH holding only a shell, rm
// and the packaged binaries, so systemctl, deb-systemd-helper and udevadm
// cannot be found. The scripts must exit 0 whether the host has XPUs, has
// none, or the spec cannot be written, and postinst must write the spec when
// /dev/xpuctrl exists.
func TestMaintainerScriptsWithoutSystemd(t *testing.T) {
	p := packages(t)
	requireTools(t, "dpkg-deb", "rpm")
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		testreq.HostInUse(t, "systemd runs on this host: the scripts would start the units")
	}
	host := fakeHost(t)
	noXPU := t.TempDir()

	// The PATH of a minimal container.
	pathDir := t.TempDir()
	for _, tool := range []string{"sh", "rm"} {
		abs, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(abs, filepath.Join(pathDir, tool)))
	}
	for _, b := range stagedBinaries(t, p) {
		require.NoError(t, os.Symlink(filepath.Join(p.stage, "bin", b), filepath.Join(pathDir, b)))
	}

	debScripts := t.TempDir()
	run(t, nil, "dpkg-deb", "--control", p.deb, debScripts)
	rpmScripts := t.TempDir()
	for name, tag := range map[string]string{"post": "POSTIN", "preun": "PREUN", "postun": "POSTUN"} {
		script := run(t, nil, "rpm", "-qp", "--qf", "%{"+tag+"}", p.rpm)
		require.NotEqual(t, "(none)", script, "%%%s", name)
		require.NoError(t, os.WriteFile(filepath.Join(rpmScripts, name), []byte(script), 0o755))
	}

	install := map[string][]string{
		"deb": {filepath.Join(debScripts, "postinst"), "configure"},
		"rpm": {filepath.Join(rpmScripts, "post"), "1"},
	}
	uninstall := map[string][][]string{
		"deb": {{filepath.Join(debScripts, "prerm"), "remove"}, {filepath.Join(debScripts, "postrm"), "remove"}},
		// $1 = 1: an upgrade; erase ($1 = 0) would remove the host's real spec.
		"rpm": {{filepath.Join(rpmScripts, "preun"), "1"}, {filepath.Join(rpmScripts, "postun"), "1"}},
	}

	tests := []struct {
		description string
		devRoot     string
		output      func(t *testing.T) string
		wantSpec    bool
		wantStderr  []string
	}{
		{
			description: "host with XPUs: the spec is written",
			devRoot:     host,
			output:      func(t *testing.T) string { return filepath.Join(t.TempDir(), "cdi", "spec.yaml") },
			wantSpec:    true,
		},
		{
			description: "host without XPUs: nothing to do",
			devRoot:     noXPU,
			output:      func(t *testing.T) string { return filepath.Join(t.TempDir(), "cdi", "spec.yaml") },
		},
		{
			description: "spec cannot be written: warning, install goes on",
			devRoot:     host,
			output:      func(t *testing.T) string { return "/dev/null/spec.yaml" },
			// xpu-cdi's own error, then the script's warning.
			wantStderr: []string{"/dev/null/spec.yaml", "generating the CDI spec failed"},
		},
	}
	for _, format := range []string{"deb", "rpm"} {
		for _, tc := range tests {
			t.Run(format+"/"+tc.description, func(t *testing.T) {
				out := tc.output(t)
				env := []string{"PATH=" + pathDir, "XPU_DEV_ROOT=" + tc.devRoot, "XPU_DRIVER_ROOT=" + tc.devRoot, "XPU_CDI_OUTPUT=" + out}
				for _, name := range []string{"systemctl", "deb-systemd-helper", "udevadm"} {
					_, err := exec.LookPath(filepath.Join(pathDir, name))
					require.Error(t, err, "%s must not be reachable", name)
				}
				args := install[format]
				stderr := run(t, env, "/bin/sh", args...)
				for _, want := range tc.wantStderr {
					require.Contains(t, stderr, want)
				}
				if tc.wantSpec {
					checkSpec(t, out, tc.devRoot)
				} else {
					require.NoFileExists(t, out)
				}
				for _, s := range uninstall[format] {
					run(t, env, "/bin/sh", s...)
				}
			})
		}
	}
}
