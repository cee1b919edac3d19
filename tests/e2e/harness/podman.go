package harness

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
)

// Podman is a Podman with its own containers.conf, storage and runtime state
// under a private temporary directory. Containers run with runc, cgroupfs,
// no network and nofile/nproc limits of 1024 (what works on cgroup v1
// hybrid hosts without CAP_SYS_RESOURCE).
type Podman struct {
	// Dir holds everything of this Podman: containers.conf, storage.conf,
	// root, runroot and tmpdir.
	Dir string
	// ConfPath is the containers.conf passed through CONTAINERS_CONF.
	ConfPath string
	Root     string
	RunRoot  string
	cmd      command
}

// NewPodman prepares a Podman for the test and registers the cleanup of its
// containers, images, mounts and storage.
func NewPodman(t testing.TB) *Podman {
	t.Helper()
	RequiresRoot(t)
	bin := RequiresTool(t, "podman")
	runc := RequiresTool(t, "runc")
	RequiresTool(t, "conmon")

	dir := shortTempDir(t, "xe2e-podman-")
	conf, err := testenv.WritePodmanConfig(dir, runc)
	if err != nil {
		t.Fatalf("configuring podman: %v", err)
	}
	p := &Podman{
		Dir:      conf.Dir,
		ConfPath: conf.ConfPath,
		Root:     conf.Root,
		RunRoot:  conf.RunRoot,
		cmd: command{
			bin:  bin,
			args: conf.Args(),
			env:  append(conf.Env(), pathEnv(systemPath)),
		},
	}
	t.Cleanup(func() { p.cleanup(t) })
	return p
}

func (p *Podman) cleanup(t testing.TB) {
	t.Helper()
	for _, args := range [][]string{
		{"rm", "--all", "--force", "--time", "0"},
		{"image", "rm", "--all", "--force"},
		{"system", "reset", "--force"},
	} {
		if r := p.cmd.run(t, args...); !r.Success() {
			t.Errorf("podman cleanup failed:\n%s", r)
		}
	}
	// shortTempDir's cleanup then unmounts what is left and removes Dir.
}

// Run runs `podman <global storage flags> args...`; a non-zero exit is
// returned, not a failure.
func (p *Podman) Run(t testing.TB, args ...string) Result {
	t.Helper()
	return p.cmd.run(t, args...)
}

// MustRun is Run that fails the test unless podman exits 0.
func (p *Podman) MustRun(t testing.TB, args ...string) Result {
	t.Helper()
	return p.Run(t, args...).RequireSuccess(t)
}

// ImportImage imports the rootfs dir as image name (podman import, CMD
// /bin/sh) and returns the reference to run (the name as given).
func (p *Podman) ImportImage(t testing.TB, rootfsDir, name string) string {
	t.Helper()
	start := time.Now()
	tarPath := filepath.Join(t.TempDir(), "rootfs.tar")
	TarRootfs(t, rootfsDir, tarPath)
	p.MustRun(t, "import", "--change", "CMD=/bin/sh", tarPath, name)
	t.Logf("podman import %s: %s", name, time.Since(start).Round(time.Millisecond))
	return name
}

// SaveOCIArchive writes image name as an OCI archive (for ctr import).
func (p *Podman) SaveOCIArchive(t testing.TB, name, archive string) {
	t.Helper()
	p.MustRun(t, "save", "--format", "oci-archive", "--output", archive, name)
}

// InstallSpec writes a CDI spec for a test vendor where Podman reads it
// (HostCDIDir); see the package function InstallSpec.
func (p *Podman) InstallSpec(t testing.TB, spec []byte, vendor string) string {
	t.Helper()
	return InstallSpec(t, spec, vendor)
}

// RunningContainers lists the IDs of running containers.
func (p *Podman) RunningContainers(t testing.TB) []string {
	t.Helper()
	out := p.MustRun(t, "ps", "--quiet", "--no-trunc").Stdout
	return strings.Fields(out)
}
