package harness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Debian's containerd 1.6 (package containerd, pulled in by docker.io).
const (
	Containerd16Bin = "/usr/bin/containerd"
	Ctr16Bin        = "/usr/bin/ctr"
)

// CRINamespace is the containerd namespace of the CRI plugin.
const CRINamespace = "k8s.io"

// CRISandboxImage is the sandbox ("pause") image the CRI plugin of
// NewContainerd uses. There is no registry: import one before creating pods,
// e.g. ImportImage(t, busyboxRootfs, CRISandboxImage,
// WithImageNamespace(CRINamespace), WithImageCmd("sleep", "2147483647")).
const CRISandboxImage = "docker.io/library/e2e-pause:latest"

// shimRuncRoot is where containerd's runc shims keep runc state, per
// namespace (not configurable through ctr); each Containerd uses its own
// namespace and removes its directory there at cleanup.
const shimRuncRoot = "/run/containerd/runc"

// Containerd is a containerd daemon started for one test with its own
// config, root, state and sockets under a private temporary directory, and
// its own namespace.
type Containerd struct {
	*daemon
	// Version is 2 for containerd 2.x (config version 3), 1 for Debian's 1.6.
	Major int
	// Address is the gRPC socket.
	Address string
	// Namespace is the containerd namespace Ctr uses.
	Namespace  string
	ConfigPath string
	specDir    string
	ctr        command
	crictl     *command
}

type containerdOptions struct {
	extraConfig string
	cri         bool
	edits       []func(t testing.TB, configPath string)
}

// ContainerdOption configures NewContainerd and NewContainerd16.
type ContainerdOption func(*containerdOptions)

// WithContainerdConfig appends TOML to the generated config (for example a
// runtime entry). It must not repeat a table the harness writes.
func WithContainerdConfig(toml string) ContainerdOption {
	return func(o *containerdOptions) { o.extraConfig += "\n" + toml + "\n" }
}

// WithCRI keeps containerd 1.6's CRI plugin enabled (it is disabled by
// default there; containerd 2.x always has it, for CDI), set up as for
// containerd 2.x (sandbox image CRISandboxImage, private CNI directories,
// restrict_oom_score_adj) and served to Crictl; its section is
// plugins."io.containerd.grpc.v1.cri" of the main file.
func WithCRI() ContainerdOption {
	return func(o *containerdOptions) { o.cri = true }
}

// WithConfigEdit calls edit with the path of the config file once the
// harness has written it and before containerd starts, for example to run a
// configuration tool on it. Files the edit adds next to the config (a
// conf.d drop-in) are removed with the containerd's directory.
func WithConfigEdit(edit func(t testing.TB, configPath string)) ContainerdOption {
	return func(o *containerdOptions) { o.edits = append(o.edits, edit) }
}

// NewContainerd starts containerd 2.x from ToolsBin() with a version 3
// config: CRI with CDI enabled reading SpecDir(), NRI disabled, the native
// overlayfs snapshotter, no TCP service. `ctr run --device` resolves CDI
// names itself from /etc/cdi and /var/run/cdi (use InstallSpec for that);
// SpecDir() is what the CRI plugin (crictl) reads.
func NewContainerd(t testing.TB, opts ...ContainerdOption) *Containerd {
	t.Helper()
	RequiresRoot(t)
	bin := RequiresTool(t, filepath.Join(ToolsBin(), "containerd"))
	ctrBin := RequiresTool(t, filepath.Join(ToolsBin(), "ctr"))
	RequiresTool(t, filepath.Join(ToolsBin(), "containerd-shim-runc-v2"))
	RequiresTool(t, "runc")
	return newContainerd(t, 2, bin, ctrBin, ToolsBin()+":"+systemPath, opts)
}

// NewContainerd16 starts Debian's containerd 1.6 (/usr/bin/containerd) with
// a version 2 config, CRI disabled unless WithCRI is given. Its shim is
// Debian's /usr/bin/containerd-shim-runc-v2.
func NewContainerd16(t testing.TB, opts ...ContainerdOption) *Containerd {
	t.Helper()
	RequiresRoot(t)
	bin := RequiresTool(t, Containerd16Bin)
	ctrBin := RequiresTool(t, Ctr16Bin)
	RequiresTool(t, "/usr/bin/containerd-shim-runc-v2")
	RequiresTool(t, "runc")
	return newContainerd(t, 1, bin, ctrBin, systemPath, opts)
}

func newContainerd(t testing.TB, major int, bin, ctrBin, path string, opts []ContainerdOption) *Containerd {
	t.Helper()
	var o containerdOptions
	for _, opt := range opts {
		opt(&o)
	}
	dir := shortTempDir(t, fmt.Sprintf("xe2e-ctd%d-", major))
	var nsb [4]byte
	if _, err := rand.Read(nsb[:]); err != nil {
		t.Fatalf("reading random bytes: %v", err)
	}
	c := &Containerd{
		Major:      major,
		Address:    filepath.Join(dir, "containerd.sock"),
		Namespace:  "e2e-" + hex.EncodeToString(nsb[:]),
		ConfigPath: filepath.Join(dir, "config.toml"),
		specDir:    filepath.Join(dir, "cdi"),
	}
	if err := os.MkdirAll(c.specDir, 0o755); err != nil {
		t.Fatalf("creating %s: %v", c.specDir, err)
	}
	var config string
	if major == 2 {
		config = containerd2Config(dir, c.Address, c.specDir)
	} else {
		config = containerd16Config(dir, c.Address, o.cri)
	}
	if err := writeFile(c.ConfigPath, []byte(config+o.extraConfig)); err != nil {
		t.Fatalf("configuring containerd: %v", err)
	}
	for _, edit := range o.edits {
		edit(t, c.ConfigPath)
	}
	c.ctr = command{
		bin:  ctrBin,
		args: []string{"--address", c.Address, "--namespace", c.Namespace},
		env:  []string{pathEnv(path)},
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(filepath.Join(shimRuncRoot, c.Namespace)); err != nil {
			t.Errorf("removing %s: %v", filepath.Join(shimRuncRoot, c.Namespace), err)
		}
		// Shared with any other CRI: removed only when empty.
		_ = os.Remove(filepath.Join(shimRuncRoot, CRINamespace))
		// ctr puts a task's cgroup below /<namespace>; runc removes the
		// task's, the namespace's stays.
		if err := removeCgroupTree("/" + c.Namespace); err != nil {
			t.Errorf("cleaning up the cgroups of containerd: %v", err)
		}
	})
	if major == 2 || o.cri {
		if crictl, err := lookTool(filepath.Join(ToolsBin(), "crictl")); err == nil {
			crictlConf := filepath.Join(dir, "crictl.yaml")
			if err := writeFile(crictlConf, []byte("runtime-endpoint: unix://"+c.Address+"\nimage-endpoint: unix://"+c.Address+"\ntimeout: 60\ndisable-pull-on-run: true\n")); err != nil {
				t.Fatalf("configuring crictl: %v", err)
			}
			c.crictl = &command{bin: crictl, args: []string{"--config", crictlConf}, env: []string{pathEnv(path)}}
		}
	}
	c.daemon = startDaemon(t, fmt.Sprintf("containerd%d", major), dir, bin,
		[]string{"--config", c.ConfigPath, "--log-level", "info"},
		[]string{pathEnv(path)},
		func() error {
			if _, err := os.Stat(c.Address); err != nil {
				return err
			}
			if r := c.ctr.run(t, "version"); !r.Success() {
				return fmt.Errorf("ctr version: %s", strings.TrimSpace(r.Stderr))
			}
			return nil
		})
	// Registered after startDaemon, so it runs before the daemon stops.
	t.Cleanup(func() { c.removeAll(t) })
	return c
}

func containerd2Config(dir, address, specDir string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %[5]q
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[9]q
  [plugins.'io.containerd.cri.v1.runtime']
    cdi_spec_dirs = [%[6]q]
    # Sandboxes ask for oom_score_adj -998; lowering it needs CAP_SYS_RESOURCE,
    # which hosts of this kind do not have.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      conf_dir = %[7]q
      bin_dirs = [%[8]q]
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), address, address+".ttrpc",
		filepath.Join(dir, "opt"), specDir, filepath.Join(dir, "cni", "net.d"), filepath.Join(dir, "cni", "bin"),
		CRISandboxImage)
}

func containerd16Config(dir, address string, cri bool) string {
	disabled := `disabled_plugins = ["io.containerd.grpc.v1.cri"]`
	criSection := ""
	if cri {
		// As for containerd 2.x: no TCP service, a local sandbox image,
		// private CNI directories, and restrict_oom_score_adj for hosts
		// without CAP_SYS_RESOURCE. containerd 1.6 has no CDI.
		disabled = ""
		criSection = fmt.Sprintf(`  [plugins."io.containerd.grpc.v1.cri"]
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    sandbox_image = %[1]q
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      conf_dir = %[2]q
      bin_dir = %[3]q
`, CRISandboxImage, filepath.Join(dir, "cni", "net.d"), filepath.Join(dir, "cni", "bin"))
	}
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
%[6]s

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[5]q
%[7]s`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), address, address+".ttrpc",
		filepath.Join(dir, "opt"), disabled, criSection)
}

// SpecDir is the CDI spec directory of the CRI plugin (containerd 2.x).
func (c *Containerd) SpecDir() string { return c.specDir }

// CNIConfDir is the CNI configuration directory of the CRI plugin.
func (c *Containerd) CNIConfDir() string {
	return filepath.Join(filepath.Dir(c.ConfigPath), "cni", "net.d")
}

// WriteSpec writes a CDI spec for a test vendor into SpecDir().
func (c *Containerd) WriteSpec(t testing.TB, spec []byte, vendor string) string {
	t.Helper()
	return WriteSpec(t, c.specDir, spec, vendor)
}

// Ctr runs ctr against this containerd in its namespace; a non-zero exit is
// returned, not a failure.
func (c *Containerd) Ctr(t testing.TB, args ...string) Result {
	t.Helper()
	return c.ctr.run(t, args...)
}

// MustCtr is Ctr that fails the test unless ctr exits 0.
func (c *Containerd) MustCtr(t testing.TB, args ...string) Result {
	t.Helper()
	return c.Ctr(t, args...).RequireSuccess(t)
}

// ImportImage imports the rootfs dir as an image (an OCI archive written by
// WriteOCIArchive, then `ctr images import`) and returns its reference,
// e.g. "docker.io/library/NAME:latest". WithImageNamespace(CRINamespace)
// makes it visible to the CRI plugin (crictl).
func (c *Containerd) ImportImage(t testing.TB, rootfsDir, name string, opts ...ImageOption) string {
	t.Helper()
	start := time.Now()
	o := newImageOptions(opts)
	ref := NormalizeImageRef(name)
	archive := filepath.Join(t.TempDir(), "image.oci.tar")
	WriteOCIArchive(t, rootfsDir, ref, archive, opts...)
	var nsArgs []string
	if o.namespace != "" {
		// ctr's last --namespace wins over the harness's own.
		nsArgs = []string{"--namespace", o.namespace}
	}
	c.MustCtr(t, append(nsArgs, "images", "import", archive)...)
	if r := c.MustCtr(t, append(nsArgs, "images", "ls", "--quiet")...); !strings.Contains(r.Stdout, ref) {
		t.Fatalf("image %s not listed after import:\n%s", ref, r)
	}
	t.Logf("containerd%d import %s: %s", c.Major, ref, time.Since(start).Round(time.Millisecond))
	return ref
}

// Crictl runs crictl (from ToolsBin) against the CRI plugin of this
// containerd 2.x (or 1.6 WithCRI); a non-zero exit is returned, not a
// failure.
func (c *Containerd) Crictl(t testing.TB, args ...string) Result {
	t.Helper()
	if c.crictl == nil {
		if c.Major != 2 {
			t.Fatalf("Crictl: the CRI plugin of containerd 1.6 is only set up WithCRI")
		}
		RequiresTool(t, filepath.Join(ToolsBin(), "crictl"))
	}
	return c.crictl.run(t, args...)
}

// MustCrictl is Crictl that fails the test unless crictl exits 0.
func (c *Containerd) MustCrictl(t testing.TB, args ...string) Result {
	t.Helper()
	return c.Crictl(t, args...).RequireSuccess(t)
}

// removeAll kills and deletes every task and container of the namespace,
// and every CRI pod.
func (c *Containerd) removeAll(t testing.TB) {
	t.Helper()
	select {
	case <-c.exited:
		return
	default:
	}
	if c.crictl != nil {
		if r := c.crictl.run(t, "rmp", "--all", "--force"); !r.Success() {
			t.Errorf("removing CRI pods:\n%s", r)
		}
	}
	for _, id := range strings.Fields(c.Ctr(t, "tasks", "ls", "--quiet").Stdout) {
		c.Ctr(t, "tasks", "kill", "--signal", "SIGKILL", id)
		for range 100 {
			if r := c.Ctr(t, "tasks", "delete", id); r.Success() {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, id := range strings.Fields(c.Ctr(t, "containers", "ls", "--quiet").Stdout) {
		if r := c.Ctr(t, "containers", "delete", id); !r.Success() {
			t.Errorf("deleting container %s:\n%s", id, r)
		}
	}
}

// EngineName is "containerd2" or "containerd1".
func (c *Containerd) EngineName() string { return fmt.Sprintf("containerd%d", c.Major) }

// Endpoint is the CRI endpoint, unix://Address (containerd 2.x, or 1.6
// WithCRI).
func (c *Containerd) Endpoint() string { return "unix://" + c.Address }

// CgroupParent is "": containerd's CRI pods get its default parent; runc
// removes their cgroups when the harness deletes them.
func (c *Containerd) CgroupParent() string { return "" }

// ImportCRIImage is ImportImage into the CRI plugin's namespace (CRINamespace).
func (c *Containerd) ImportCRIImage(t testing.TB, rootfsDir, name string, opts ...ImageOption) string {
	t.Helper()
	return c.ImportImage(t, rootfsDir, name, append(opts, WithImageNamespace(CRINamespace))...)
}
