package harness

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Debian's Docker 20.10 (package docker.io). The client is called by path:
// a newer docker CLI elsewhere in PATH must not be used against it.
const (
	DockerdBin = "/usr/sbin/dockerd"
	DockerBin  = "/usr/bin/docker"
)

// Dockerd is a dockerd 20.10 started for one test with its own daemon.json,
// data root, exec root, socket and pidfile under a private temporary
// directory, no iptables and no bridge. It supervises its own containerd
// 1.6 (state under the exec root) unless a system containerd is running at
// /run/containerd/containerd.sock, which dockerd then uses.
type Dockerd struct {
	*daemon
	Host       string // unix:// address of the API socket
	ConfigPath string // daemon.json
	DataRoot   string
	ExecRoot   string
	docker     command
}

// NewDockerd starts dockerd with daemonJSON (nil for none) written as its
// daemon.json. The map must not repeat what the harness passes as flags
// (data-root, exec-root, hosts, pidfile, iptables, bridge): dockerd refuses
// a directive given both ways.
func NewDockerd(t testing.TB, daemonJSON map[string]any) *Dockerd {
	t.Helper()
	RequiresRoot(t)
	bin := RequiresTool(t, DockerdBin)
	cli := RequiresTool(t, DockerBin)
	RequiresTool(t, "/usr/bin/containerd")
	RequiresTool(t, "runc")

	dir := shortTempDir(t, "xe2e-dockerd-")
	d := &Dockerd{
		Host:       "unix://" + filepath.Join(dir, "docker.sock"),
		ConfigPath: filepath.Join(dir, "daemon.json"),
		DataRoot:   filepath.Join(dir, "data"),
		ExecRoot:   filepath.Join(dir, "exec"),
	}
	if daemonJSON == nil {
		daemonJSON = map[string]any{}
	}
	cfg, err := json.MarshalIndent(daemonJSON, "", "  ")
	if err != nil {
		t.Fatalf("encoding daemon.json: %v", err)
	}
	if err := writeFile(d.ConfigPath, cfg); err != nil {
		t.Fatalf("configuring dockerd: %v", err)
	}
	d.docker = command{
		bin: cli,
		env: []string{
			"DOCKER_HOST=" + d.Host,
			"DOCKER_CONFIG=" + filepath.Join(dir, "client"),
			pathEnv(systemPath),
		},
	}
	d.daemon = startDaemon(t, "dockerd", dir, bin, []string{
		"--config-file", d.ConfigPath,
		"--data-root", d.DataRoot,
		"--exec-root", d.ExecRoot,
		"--host", d.Host,
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		"--iptables=false",
		"--ip-masq=false",
		"--bridge=none",
	}, []string{pathEnv(systemPath)}, func() error {
		if r := d.docker.run(t, "version", "--format", "{{.Server.Version}}"); !r.Success() {
			return fmt.Errorf("docker version: %s", strings.TrimSpace(r.Stderr))
		}
		return nil
	})
	// Registered after startDaemon, so it runs before dockerd stops.
	t.Cleanup(func() { d.removeAll(t) })
	return d
}

// Docker runs the docker 20.10 CLI against this dockerd; a non-zero exit is
// returned, not a failure.
func (d *Dockerd) Docker(t testing.TB, args ...string) Result {
	t.Helper()
	return d.docker.run(t, args...)
}

// MustDocker is Docker that fails the test unless docker exits 0.
func (d *Dockerd) MustDocker(t testing.TB, args ...string) Result {
	t.Helper()
	return d.Docker(t, args...).RequireSuccess(t)
}

// ImportImage imports the rootfs dir as image name (docker import of its
// tar, with CMD /bin/sh) and returns the reference to run.
func (d *Dockerd) ImportImage(t testing.TB, rootfsDir, name string) string {
	t.Helper()
	start := time.Now()
	tarPath := filepath.Join(t.TempDir(), "rootfs.tar")
	TarRootfs(t, rootfsDir, tarPath)
	d.MustDocker(t, "import", "--change", `CMD ["/bin/sh"]`, tarPath, name)
	t.Logf("dockerd import %s: %s", name, time.Since(start).Round(time.Millisecond))
	return name
}

func (d *Dockerd) removeAll(t testing.TB) {
	t.Helper()
	select {
	case <-d.exited:
		return
	default:
	}
	ids := strings.Fields(d.Docker(t, "ps", "--all", "--quiet").Stdout)
	if len(ids) > 0 {
		if r := d.Docker(t, append([]string{"rm", "--force", "--volumes"}, ids...)...); !r.Success() {
			t.Errorf("removing containers:\n%s", r)
		}
	}
}
