package packaging

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goMachine is the ELF machine of each architecture xpu-cdi is built for.
var goMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// foreignArch is the other architecture of the two that are packaged.
func foreignArch() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

// requireStaticELF checks that path is a static executable for machine:
// no program interpreter, no needed libraries.
func requireStaticELF(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	require.NoError(t, err, "%s is not an ELF file", path)
	defer f.Close()
	require.Equal(t, machine, f.Machine, "%s", path)
	require.Equal(t, elf.ET_EXEC, f.Type, "%s: a static executable", path)
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "%s has a program interpreter: not static", path)
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.Empty(t, libs, "%s needs shared libraries", path)
}

// commands lists the binaries the project has: one directory of cmd/ each.
func commands(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), "cmd"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	require.NotEmpty(t, names)
	return names
}

// TestMakeBuildArches runs `make build` for the host and `make build
// GOARCH=<the other>` into one BINDIR: the host's binaries, one per cmd/
// directory, land in BINDIR itself (where the tests and hack/demo.sh run
// them), the other architecture's in BINDIR/linux-<arch>, each a static ELF
// executable of its machine. Needs neither root nor packaging tools: only
// make and go.
func TestMakeBuildArches(t *testing.T) {
	requireTools(t, "make", "go")
	bin := t.TempDir()
	foreign := foreignArch()
	for _, args := range [][]string{{"build"}, {"build", "GOARCH=" + foreign}} {
		cmd := exec.Command("make", append(args, "BINDIR="+bin)...)
		cmd.Dir = repoRoot(t)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make %s:\n%s", strings.Join(args, " "), out)
	}
	for _, c := range []struct {
		dir  string
		arch string
	}{{bin, runtime.GOARCH}, {filepath.Join(bin, "linux-"+foreign), foreign}} {
		for _, name := range commands(t) {
			requireStaticELF(t, filepath.Join(c.dir, name), goMachine[c.arch])
		}
	}
	entries, err := os.ReadDir(bin)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, append(commands(t), "linux-"+foreign), names)
}

// debFiles lists the paths of a .deb's payload (not its directories).
func debFiles(t *testing.T, deb string) []string {
	t.Helper()
	var files []string
	for _, line := range strings.Split(run(t, nil, "dpkg-deb", "--contents", deb), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || strings.HasPrefix(fields[0], "d") {
			continue
		}
		files = append(files, strings.TrimPrefix(fields[5], "."))
	}
	sort.Strings(files)
	return files
}

// rpmFiles lists the paths of an .rpm's payload (not its directories).
func rpmFiles(t *testing.T, rpm string) []string {
	t.Helper()
	var files []string
	for _, line := range strings.Split(run(t, nil, "rpm", "-qp", "--qf", `[%{FILEMODES:perms} %{FILENAMES}\n]`, rpm), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 2 && !strings.HasPrefix(fields[0], "d") {
			files = append(files, fields[1])
		}
	}
	sort.Strings(files)
	return files
}

// TestForeignArchPackages builds the packages of the other architecture
// (`make deb rpm GOARCH=arm64` on an amd64 host: an arm64 .deb and an
// aarch64 .rpm; the make targets run lintian --fail-on error and rpmlint on
// them, as for the host's), and checks them without installing them on the
// host: their architecture fields, that every binary in them is a static
// executable for that machine, and that they carry the very same files,
// config and man pages as the host's packages.
func TestForeignArchPackages(t *testing.T) {
	foreign := foreignArch()
	p := packagesFor(t, foreign)
	host := packages(t)
	requireTools(t, "dpkg-deb", "rpm")
	debArch, rpmArch := foreign, map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[foreign]

	require.Equal(t, "xpu-cdi_"+p.version+"_"+debArch+".deb", filepath.Base(p.deb))
	require.Equal(t, "xpu-cdi-"+p.version+"-1."+rpmArch+".rpm", filepath.Base(p.rpm))
	require.Equal(t, debArch, strings.TrimSpace(run(t, nil, "dpkg-deb", "--field", p.deb, "Architecture")))
	require.Equal(t, rpmArch, strings.TrimSpace(run(t, nil, "rpm", "-qp", "--qf", "%{ARCH}", p.rpm)))

	// Lint as TestDebLintian and TestRPMLint do for the host's packages.
	out, err := runErr(nil, "lintian", "--fail-on", "error", p.deb)
	require.NoError(t, err, "lintian %s:\n%s", p.deb, out)
	out, err = runErr(nil, "rpmlint", "-c", filepath.Join(repoRoot(t), "packaging", "rpm", "rpmlint.toml"), p.rpm)
	require.NoError(t, err, "rpmlint %s:\n%s", p.rpm, out)
	require.Contains(t, out, " 0 errors")

	debRoot, rpmRoot := t.TempDir(), t.TempDir()
	run(t, nil, "dpkg-deb", "--extract", p.deb, debRoot)
	// --ignorearch: the package is for another machine; rpm only unpacks it.
	run(t, nil, "rpm", "--root", rpmRoot, "--nodeps", "--noscripts", "--ignorearch", "-i", p.rpm)
	names := stagedBinaries(t, p)
	// The DRA driver ships in the image only.
	require.ElementsMatch(t, []string{"xpu-cdi", "xpu-container-runtime", "xpu-device-plugin", "xpu-exporter", "xpu-runtime-hook"}, names)
	for _, b := range names {
		requireStaticELF(t, filepath.Join(p.stage, "bin", b), goMachine[foreign])
		requireStaticELF(t, filepath.Join(debRoot, "usr/bin", b), goMachine[foreign])
		requireStaticELF(t, filepath.Join(rpmRoot, "usr/bin", b), goMachine[foreign])
	}

	require.Equal(t, debFiles(t, host.deb), debFiles(t, p.deb), "the .deb of each architecture holds the same files")
	require.Equal(t, rpmFiles(t, host.rpm), rpmFiles(t, p.rpm), "the .rpm of each architecture holds the same files")
	// The config and the man pages come from host builds of the same source.
	for _, f := range []string{"config.toml", "man/xpu-cdi.1", "man/xpu-runtime-hook.1", "man/xpu-device-plugin.1"} {
		want, err := os.ReadFile(filepath.Join(host.stage, f))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(p.stage, f))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), f)
	}
}

// TestStageRefusesWrongArchBinaries packages prebuilt host binaries as the
// other architecture: stage.sh refuses them, naming the file, and leaves no
// package behind.
func TestStageRefusesWrongArchBinaries(t *testing.T) {
	requireTools(t, "make", "go")
	bin := t.TempDir()
	cmd := exec.Command("make", "build", "BINDIR="+bin)
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make build:\n%s", out)

	stage := filepath.Join(t.TempDir(), "stage")
	cmd = exec.Command("packaging/stage.sh", stage)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "PREBUILT_BINDIR="+bin, "GOARCH="+foreignArch())
	out, err = cmd.CombinedOutput()
	require.Error(t, err, "stage.sh packaged %s binaries as %s:\n%s", runtime.GOARCH, foreignArch(), out)
	require.Contains(t, string(out), "is not an ELF executable for "+foreignArch())
	require.NoFileExists(t, filepath.Join(stage, "config.toml"))
}
