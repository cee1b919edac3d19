package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// TrixiePath is the PATH of commands run in the Debian 13 root.
const TrixiePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// trixieHolder sets up the mounts of a Trixie in a mount namespace of its
// own (private propagation: nothing reaches the host's mount table, and the
// kernel drops every mount when the namespace's last process exits), prints
// "ready" and sleeps. The root is an overlay whose lower layer is the cached
// root file system (never written) and whose upper layer is the test's; it
// is a mount point, which runc's pivot_root needs. /proc, /sys (cgroups),
// /dev and a /run tmpfs are what the engines need; the host's temporary
// directory (os.TempDir) is bound at the same path, so a path under it (the
// test's fake host tree, sockets, logs, archives) is the same inside and out; the engines' storage is on
// directories of the host file system (overlay on an overlay's upper layer
// is refused).
const trixieHolder = `set -eu
root=$1 lower=$2 upper=$3 work=$4 store=$5 tmp=$6
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mkdir -p "$root$tmp"
mount --bind "$tmp" "$root$tmp"
for d in containers docker containerd; do
	mkdir -p "$store/$d" "$root/var/lib/$d"
	mount --bind "$store/$d" "$root/var/lib/$d"
done
echo ready
exec sleep 2147483647
`

// Trixie is a Debian 13 host for one test: a chroot into a copy-on-write
// view of the root file system hack/install-deps.sh builds with mmdebstrap
// (testreq.TrixieRoot), with trixie's own Podman, Docker and containerd,
// in a mount namespace of its own. Commands run inside with Run; files are
// written inside with WriteFile. Everything the test changes is gone at
// cleanup; the cached root is never written.
type Trixie struct {
	// Dir is the test's private directory on the host (and, through the
	// bind of the temporary directory, at the same path inside): sockets
	// and configs go there.
	Dir string
	// Root is where the chroot's root is mounted inside the namespace.
	Root   string
	holder *exec.Cmd
}

// NewTrixie sets up a Trixie; it is torn down at cleanup, after the daemons
// started in it.
func NewTrixie(t testing.TB) *Trixie {
	t.Helper()
	RequiresRoot(t)
	lower := testreq.TrixieRoot(t)
	unshare := RequiresTool(t, "unshare")
	RequiresTool(t, "nsenter")
	RequiresTool(t, "chroot")

	dir := shortTempDir(t, "xe2e-trixie-")
	tr := &Trixie{Dir: dir, Root: filepath.Join(dir, "root")}
	for _, d := range []string{"root", "upper", "work", "store"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatalf("creating %s: %v", filepath.Join(dir, d), err)
		}
	}
	tmp, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		t.Fatalf("resolving the temporary directory %s: %v", os.TempDir(), err)
	}
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "--", "sh", "-c", trixieHolder, "trixie-holder",
		tr.Root, lower, filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "store"), tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("trixie holder: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the trixie mount namespace: %v", err)
	}
	tr.holder = cmd
	// Registered after shortTempDir's cleanup, so it runs before it; the
	// daemons' cleanups, registered later, run before this one.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("unexpected output %q", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("setting up the trixie root (%s over %s): %v: %s", tr.Root, lower, err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("setting up the trixie root (%s over %s): no answer after 30 s: %s", tr.Root, lower, stderr.String())
	}
	t.Logf("trixie root %s over %s (namespace of pid %d)", tr.Root, lower, cmd.Process.Pid)
	return tr
}

// HostPath is the path on the host through which the file path inside the
// chroot is reached (the holder's /proc/PID/root), with the symlinks of its
// directories resolved inside the chroot (/var/run -> /run is the chroot's
// /run, not the namespace's); the last component is not followed, so a
// symlink is seen as itself (os.Lstat).
func (tr *Trixie) HostPath(path string) string {
	root := filepath.Join("/proc", strconv.Itoa(tr.holder.Process.Pid), "root", tr.Root)
	dir, err := securejoin.SecureJoin(root, filepath.Dir(filepath.Clean("/"+path)))
	if err != nil {
		// Only an unreadable directory on the way: the lexical path.
		return filepath.Join(root, path)
	}
	return filepath.Join(dir, filepath.Base(path))
}

// WriteFile writes a file inside the chroot (mode 0644), creating its
// parent directories.
func (tr *Trixie) WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := writeFile(tr.HostPath(path), data); err != nil {
		t.Fatalf("trixie: %v", err)
	}
}

// ReadFile reads a file inside the chroot.
func (tr *Trixie) ReadFile(t testing.TB, path string) ([]byte, error) {
	t.Helper()
	return os.ReadFile(tr.HostPath(path))
}

// argv is the command line that runs args inside the chroot with env (and
// PATH=TrixiePath, HOME=/root) and nothing else of the test's environment.
func (tr *Trixie) argv(env []string, args ...string) []string {
	out := []string{
		"--target", strconv.Itoa(tr.holder.Process.Pid), "--mount", "--", "chroot", tr.Root,
		"/usr/bin/env", "-i", "PATH=" + TrixiePath, "HOME=/root", "LANG=C.UTF-8",
	}
	out = append(out, env...)
	return append(out, args...)
}

// Run runs args inside the chroot with the extra environment env; a
// non-zero exit is returned, not a failure.
func (tr *Trixie) Run(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	return command{bin: "nsenter"}.run(t, tr.argv(env, args...)...)
}

// MustRun is Run that fails the test unless the command exits 0.
func (tr *Trixie) MustRun(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	return tr.Run(t, env, args...).RequireSuccess(t)
}

// startDaemon starts a daemon inside the chroot (see startDaemon).
func (tr *Trixie) startDaemon(t testing.TB, name string, args []string, ready func() error) *daemon {
	t.Helper()
	dir := filepath.Join(tr.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("creating %s: %v", dir, err)
	}
	nsenter := RequiresTool(t, "nsenter")
	return startDaemon(t, name, dir, nsenter, tr.argv(nil, args...), nil, ready)
}

// TrixiePodman is trixie's Podman 5 in a Trixie, as root with runc, cgroupfs
// and the file events backend (crun 1.21 refuses the hybrid cgroups of
// hosts of this kind), no network, and the nofile/nproc limits such hosts
// allow.
type TrixiePodman struct{ tr *Trixie }

// Podman prepares trixie's Podman: its containers.conf in /etc/containers.
func (tr *Trixie) Podman(t testing.TB) *TrixiePodman {
	t.Helper()
	tr.WriteFile(t, "/etc/containers/containers.conf", []byte(`[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
netns = "none"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`))
	p := &TrixiePodman{tr: tr}
	t.Cleanup(func() {
		if r := p.Run(t, "rm", "--all", "--force", "--time", "0"); !r.Success() {
			t.Errorf("podman cleanup failed:\n%s", r)
		}
	})
	return p
}

// Run runs `podman args...` inside the chroot; a non-zero exit is returned.
func (p *TrixiePodman) Run(t testing.TB, args ...string) Result {
	t.Helper()
	return p.tr.Run(t, nil, append([]string{"podman"}, args...)...)
}

// MustRun is Run that fails the test unless podman exits 0.
func (p *TrixiePodman) MustRun(t testing.TB, args ...string) Result {
	t.Helper()
	return p.Run(t, args...).RequireSuccess(t)
}

// ImportImage imports the rootfs dir (a host path under /tmp) as image name.
func (p *TrixiePodman) ImportImage(t testing.TB, rootfsDir, name string) string {
	t.Helper()
	tarPath := filepath.Join(p.tr.Dir, name+".tar")
	TarRootfs(t, rootfsDir, tarPath)
	p.MustRun(t, "import", "--change", "CMD=/bin/sh", tarPath, name)
	return name
}

// TrixieDockerd is trixie's dockerd 26 in a Trixie, with the daemon.json the
// chroot holds (/etc/docker/daemon.json), no iptables and no bridge, its
// API on Socket (a host path: there is no docker CLI in trixie's main, the
// tests speak the Engine API).
type TrixieDockerd struct {
	*daemon
	Socket string
}

// Dockerd starts trixie's dockerd; it runs its own containerd.
func (tr *Trixie) Dockerd(t testing.TB) *TrixieDockerd {
	t.Helper()
	d := &TrixieDockerd{Socket: filepath.Join(tr.Dir, "docker.sock")}
	d.daemon = tr.startDaemon(t, "dockerd", []string{
		"dockerd",
		"--host", "unix://" + d.Socket,
		"--iptables=false", "--ip6tables=false", "--ip-masq=false", "--bridge=none",
	}, func() error {
		_, err := DockerAPI(d.Socket).Version(context.Background())
		return err
	})
	return d
}

// TrixieContainerd is trixie's containerd 1.7 in a Trixie with its CRI
// plugin (CDI on, the spec directories /etc/cdi and /var/run/cdi of the
// chroot), driven through crictl (from ToolsBin) on its socket in Dir.
type TrixieContainerd struct {
	*daemon
	tr      *Trixie
	Address string
	crictl  command
}

var _ CRI = (*TrixieContainerd)(nil)

// Containerd starts trixie's containerd 1.7 with config (a version 2
// config.toml; ContainerdConfig17 gives one) written to Dir.
func (tr *Trixie) Containerd(t testing.TB, config func(address string) string) *TrixieContainerd {
	t.Helper()
	crictl := RequiresTool(t, filepath.Join(ToolsBin(), "crictl"))
	c := &TrixieContainerd{tr: tr, Address: filepath.Join(tr.Dir, "containerd.sock")}
	cfg := filepath.Join(tr.Dir, "containerd.toml")
	if err := writeFile(cfg, []byte(config(c.Address))); err != nil {
		t.Fatalf("configuring containerd: %v", err)
	}
	conf := filepath.Join(tr.Dir, "crictl.yaml")
	if err := writeFile(conf, []byte("runtime-endpoint: unix://"+c.Address+"\nimage-endpoint: unix://"+c.Address+"\ntimeout: 60\ndisable-pull-on-run: true\n")); err != nil {
		t.Fatalf("configuring crictl: %v", err)
	}
	c.crictl = command{bin: crictl, args: []string{"--config", conf}, env: []string{pathEnv(systemPath)}}
	c.daemon = tr.startDaemon(t, "containerd", []string{"containerd", "--config", cfg, "--log-level", "info"}, func() error {
		if _, err := os.Stat(c.Address); err != nil {
			return err
		}
		if r := c.Crictl(t, "version"); !r.Success() {
			return fmt.Errorf("crictl version: %s", strings.TrimSpace(r.Stderr))
		}
		return nil
	})
	t.Cleanup(func() {
		select {
		case <-c.exited:
			return
		default:
		}
		if r := c.Crictl(t, "rmp", "--all", "--force"); !r.Success() {
			t.Errorf("removing CRI pods:\n%s", r)
		}
	})
	return c
}

// ContainerdConfig17 is a containerd 1.7 config (version 2) with state
// under /run, CRI on with enable_cdi and the default spec directories, no
// TCP service, the harness's sandbox image, restrict_oom_score_adj (hosts
// without CAP_SYS_RESOURCE) and private, empty CNI directories.
func (tr *Trixie) ContainerdConfig17(address string) string {
	return fmt.Sprintf(`version = 2
root = "/var/lib/containerd"
state = "/run/containerd-e2e"

[grpc]
  address = %[1]q

[ttrpc]
  address = %[2]q

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    sandbox_image = %[3]q
    restrict_oom_score_adj = true
    enable_cdi = true
    cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      conf_dir = %[4]q
      bin_dir = %[5]q
`, address, address+".ttrpc", CRISandboxImage, filepath.Join(tr.Dir, "cni", "net.d"), filepath.Join(tr.Dir, "cni", "bin"))
}

// EngineName names the engine.
func (c *TrixieContainerd) EngineName() string { return "containerd1.7-trixie" }

// Endpoint is the CRI endpoint.
func (c *TrixieContainerd) Endpoint() string { return "unix://" + c.Address }

// CgroupParent is "": containerd's default.
func (c *TrixieContainerd) CgroupParent() string { return "" }

// Crictl runs crictl against the CRI plugin; a non-zero exit is returned.
func (c *TrixieContainerd) Crictl(t testing.TB, args ...string) Result {
	t.Helper()
	return c.crictl.run(t, args...)
}

// MustCrictl is Crictl that fails the test unless crictl exits 0.
func (c *TrixieContainerd) MustCrictl(t testing.TB, args ...string) Result {
	t.Helper()
	return c.Crictl(t, args...).RequireSuccess(t)
}

// ImportCRIImage imports the rootfs dir as image name into the CRI
// namespace with trixie's ctr 1.7.
func (c *TrixieContainerd) ImportCRIImage(t testing.TB, rootfsDir, name string, opts ...ImageOption) string {
	t.Helper()
	ref := NormalizeImageRef(name)
	archive := filepath.Join(c.tr.Dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".oci.tar")
	WriteOCIArchive(t, rootfsDir, ref, archive, opts...)
	c.tr.MustRun(t, nil, "ctr", "--address", c.Address, "--namespace", CRINamespace, "images", "import", archive)
	return ref
}

// SpecDir is the chroot's /etc/cdi, as the host reaches it.
func (c *TrixieContainerd) SpecDir() string { return c.tr.HostPath("/etc/cdi") }

// WriteSpec writes a test vendor's spec into the chroot's /etc/cdi.
func (c *TrixieContainerd) WriteSpec(t testing.TB, spec []byte, vendor string) string {
	t.Helper()
	return WriteSpec(t, c.SpecDir(), spec, vendor)
}

// CNIConfDir is the CRI plugin's (empty) CNI configuration directory.
func (c *TrixieContainerd) CNIConfDir() string { return filepath.Join(c.tr.Dir, "cni", "net.d") }
