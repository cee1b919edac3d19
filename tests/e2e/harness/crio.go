package harness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
)

// Debian's CNI plugins (package containernetworking-plugins). CRI-O wants a
// plugin directory even though the harness's pods use the host network.
const cniPluginDir = "/usr/lib/cni"

// CRIO is a CRI-O (built by hack/install-deps.sh into ToolsBin) started for
// one test with its own crio.conf, drop-in directory, containers/storage
// root and run root, socket, CDI spec directory and logs under a private
// temporary directory. Containers run with runc (runtime handler "runc",
// the default), conmon and the cgroupfs cgroup manager; pods must use the
// host network (there is no CNI configuration). It runs in a mount
// namespace of its own whose / is shared (MountNamespace).
type CRIO struct {
	*daemon
	// Dir holds everything of this CRI-O.
	Dir string
	// Socket is the CRI socket.
	Socket string
	// ConfigPath is the main file (crio --config); ConfigDir the drop-in
	// directory (crio --config-dir), empty unless a test writes to it.
	ConfigPath string
	ConfigDir  string
	// Root and RunRoot are the containers/storage directories (overlay).
	Root         string
	RunRoot      string
	specDir      string
	cgroupParent string
	mountNS      string
	crio         command
	crictl       command
	podman       command
}

var _ CRI = (*CRIO)(nil)

type crioOptions struct {
	edits []func(t testing.TB, c *CRIO)
}

// CRIOOption configures NewCRIO.
type CRIOOption func(*crioOptions)

// WithCRIOConfigEdit calls edit once crio.conf is written and before CRI-O
// starts, for example to write a drop-in into c.ConfigDir (CRI-O applies
// its files in name order over crio.conf, key by key) or to run a
// configuration tool.
func WithCRIOConfigEdit(edit func(t testing.TB, c *CRIO)) CRIOOption {
	return func(o *crioOptions) { o.edits = append(o.edits, edit) }
}

// NewCRIO starts CRI-O with a config whose CRI reads CDI specs from
// SpecDir() only, pause image CRISandboxImage (import it before the first
// pod: PrepareCRI), NRI, metrics and tracing off, and every path CRI-O
// would use on the host (logs, exits, attach sockets, pinned namespaces,
// version files, hooks, mounts, signature policy, registries) moved into
// its private directory.
func NewCRIO(t testing.TB, opts ...CRIOOption) *CRIO {
	t.Helper()
	RequiresRoot(t)
	bin := RequiresTool(t, filepath.Join(ToolsBin(), "crio"))
	pinns := RequiresTool(t, filepath.Join(ToolsBin(), "pinns"))
	crictl := RequiresTool(t, filepath.Join(ToolsBin(), "crictl"))
	runc := RequiresTool(t, "runc")
	conmon := RequiresTool(t, "conmon")
	podman := RequiresTool(t, "podman")
	nsenter := RequiresTool(t, "nsenter")
	RequiresTool(t, filepath.Join(cniPluginDir, "loopback"))

	var o crioOptions
	for _, opt := range opts {
		opt(&o)
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatalf("reading random bytes: %v", err)
	}
	// The pods' cgroup parent: CRI-O leaves the cgroup of conmon behind when
	// a container create fails (kubelet, which owns pod cgroups, normally
	// removes it). Registered before shortTempDir, so it runs after every
	// process of this CRI-O has been killed.
	cgroupParent := "/xe2e-crio-" + hex.EncodeToString(rnd[:])
	t.Cleanup(func() {
		if err := removeCgroupTree(cgroupParent); err != nil {
			t.Errorf("cleaning up the cgroups of crio: %v", err)
		}
	})
	dir := shortTempDir(t, "xe2e-crio-")
	// The storage is shared with a Podman used only to import images
	// (podman import): same graph root, run root and overlay driver.
	storage, err := testenv.WritePodmanConfig(filepath.Join(dir, "storage"), runc)
	if err != nil {
		t.Fatalf("configuring the storage of crio: %v", err)
	}
	c := &CRIO{
		Dir:          dir,
		Socket:       filepath.Join(dir, "crio.sock"),
		ConfigPath:   filepath.Join(dir, "crio.conf"),
		ConfigDir:    filepath.Join(dir, "crio.conf.d"),
		Root:         storage.Root,
		RunRoot:      storage.RunRoot,
		specDir:      filepath.Join(dir, "cdi"),
		cgroupParent: cgroupParent,
	}
	for _, d := range []string{c.ConfigDir, c.specDir, filepath.Join(dir, "hooks.d"), filepath.Join(dir, "net.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("creating %s: %v", d, err)
		}
	}
	for path, data := range map[string]string{
		filepath.Join(dir, "policy.json"): `{"default": [{"type": "insecureAcceptAnything"}]}` + "\n",
		filepath.Join(dir, "mounts.conf"): "",
	} {
		if err := writeFile(path, []byte(data)); err != nil {
			t.Fatalf("configuring crio: %v", err)
		}
	}
	// The runtime of handler runc: runc itself, or the wrapper below where
	// CRI-O would ask it for what this host refuses.
	handlerRunc := runc
	if hugetlbUnmounted() || !hasCapSysResource() {
		handlerRunc = filepath.Join(dir, "runc-restricted")
		if err := os.WriteFile(handlerRunc, []byte(restrictedRuncWrapper(runc)), 0o755); err != nil {
			t.Fatalf("writing %s: %v", handlerRunc, err)
		}
	}
	if err := writeFile(c.ConfigPath, []byte(crioConfig(dir, c, handlerRunc, conmon, pinns))); err != nil {
		t.Fatalf("configuring crio: %v", err)
	}
	env := append(storage.Env(), pathEnv(systemPath))
	c.crio = command{bin: bin, args: []string{"--config", c.ConfigPath, "--config-dir", c.ConfigDir}, env: env}
	c.podman = command{bin: podman, args: storage.Args(), env: env}
	crictlConf := filepath.Join(dir, "crictl.yaml")
	if err := writeFile(crictlConf, []byte("runtime-endpoint: "+c.Endpoint()+"\nimage-endpoint: "+c.Endpoint()+"\ntimeout: 60\ndisable-pull-on-run: true\n")); err != nil {
		t.Fatalf("configuring crictl: %v", err)
	}
	c.crictl = command{bin: crictl, args: []string{"--config", crictlConf}, env: []string{pathEnv(systemPath)}}
	for _, edit := range o.edits {
		edit(t, c)
	}
	// CRI-O in a mount namespace whose / is shared, as on a node: it forces
	// HostToContainer on every hostPath that holds its storage root (the
	// host's /), which needs a shared or slave source mount. Registered
	// after shortTempDir and before startDaemon: it goes once CRI-O has
	// stopped, before the directory is removed.
	c.mountNS = sharedMountNamespace(t)
	c.daemon = startDaemon(t, "crio", dir, nsenter,
		append(append([]string{"--mount=" + c.mountNS, "--", bin}, c.crio.args...), "--log-level", "info"),
		env,
		func() error {
			if _, err := os.Stat(c.Socket); err != nil {
				return err
			}
			if r := c.crictl.run(t, "version"); !r.Success() {
				return fmt.Errorf("crictl version: %s", strings.TrimSpace(r.Stderr))
			}
			return nil
		})
	// Registered after startDaemon, so it runs before the daemon stops.
	t.Cleanup(func() { c.removeAll(t) })
	return c
}

// crioConfig is the main crio.conf: every host path CRI-O has a default
// for is moved under dir.
func crioConfig(dir string, c *CRIO, runc, conmon, pinns string) string {
	p := func(name string) string { return filepath.Join(dir, name) }
	return fmt.Sprintf(`[crio]
root = %[1]q
runroot = %[2]q
storage_driver = "overlay"
log_dir = %[3]q
version_file = %[4]q
version_file_persist = %[5]q
clean_shutdown_file = %[6]q

[crio.api]
listen = %[7]q
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
cdi_spec_dirs = [%[8]q]
hooks_dir = [%[9]q]
default_mounts_file = %[10]q
container_exits_dir = %[11]q
container_attach_socket_dir = %[12]q
namespaces_dir = %[13]q
pinns_path = %[14]q
irqbalance_config_file = %[15]q
irqbalance_config_restore_file = "disable"
log_to_journald = false
selinux = false

[crio.runtime.runtimes.runc]
runtime_path = %[16]q
runtime_type = "oci"
runtime_root = %[17]q
monitor_path = %[18]q
monitor_cgroup = "pod"
monitor_env = ["PATH=%[19]s"]

[crio.image]
pause_image = %[20]q
pause_command = ""
signature_policy = %[21]q
signature_policy_dir = %[25]q
global_auth_file = ""
big_files_temporary_dir = %[22]q

[crio.network]
network_dir = %[23]q
plugin_dirs = [%[24]q]

[crio.metrics]
enable_metrics = false

[crio.tracing]
enable_tracing = false

[crio.nri]
enable_nri = false
`, c.Root, c.RunRoot, p("pod-logs"), p("version"), p("version-persist"), p("clean.shutdown"),
		c.Socket, c.specDir, p("hooks.d"), p("mounts.conf"), p("exits"), p("attach"), p("ns"), pinns,
		p("irqbalance"), runc, p("runc"), conmon, systemPath,
		CRISandboxImage, p("policy.json"), p("tmp"), p("net.d"), cniPluginDir, p("policies"))
}

// EngineName is "crio".
func (c *CRIO) EngineName() string { return "crio" }

// MountNamespace is the mount namespace CRI-O runs in (sharedMountNamespace):
// a kubelet joins it (nsenter --mount), so that the volumes it mounts are
// CRI-O's to bind into containers.
func (c *CRIO) MountNamespace() string { return c.mountNS }

// Endpoint is the CRI endpoint, unix://Socket.
func (c *CRIO) Endpoint() string { return "unix://" + c.Socket }

// CgroupParent is the cgroup parent of this CRI-O's pods, private to it
// ("/xe2e-crio-<random>") and removed with it.
func (c *CRIO) CgroupParent() string { return c.cgroupParent }

// SpecDir is the only CDI spec directory this CRI-O reads.
func (c *CRIO) SpecDir() string { return c.specDir }

// CNIConfDir is CRI-O's network_dir.
func (c *CRIO) CNIConfDir() string { return filepath.Join(c.Dir, "net.d") }

// WriteSpec writes a CDI spec for a test vendor into SpecDir().
func (c *CRIO) WriteSpec(t testing.TB, spec []byte, vendor string) string {
	t.Helper()
	return WriteSpec(t, c.specDir, spec, vendor)
}

// Crio runs the crio binary with this CRI-O's --config and --config-dir
// (e.g. "config" prints the effective configuration, "status", "--socket",
// Socket, "config" asks the running daemon); a non-zero exit is returned,
// not a failure.
func (c *CRIO) Crio(t testing.TB, args ...string) Result {
	t.Helper()
	return c.crio.run(t, args...)
}

// MustCrio is Crio that fails the test unless crio exits 0.
func (c *CRIO) MustCrio(t testing.TB, args ...string) Result {
	t.Helper()
	return c.Crio(t, args...).RequireSuccess(t)
}

// Crictl runs crictl (from ToolsBin) against this CRI-O; a non-zero exit is
// returned, not a failure.
func (c *CRIO) Crictl(t testing.TB, args ...string) Result {
	t.Helper()
	return c.crictl.run(t, args...)
}

// MustCrictl is Crictl that fails the test unless crictl exits 0.
func (c *CRIO) MustCrictl(t testing.TB, args ...string) Result {
	t.Helper()
	return c.Crictl(t, args...).RequireSuccess(t)
}

// ImportImage imports the rootfs dir into CRI-O's storage as image name
// (`podman import` on the same storage; Cmd ["/bin/sh"] unless WithImageCmd
// says otherwise) and returns its reference, e.g.
// "docker.io/library/NAME:latest" (NormalizeImageRef), which CRI-O then
// lists. WithImageNamespace is ignored: CRI-O has no namespaces.
func (c *CRIO) ImportImage(t testing.TB, rootfsDir, name string, opts ...ImageOption) string {
	t.Helper()
	start := time.Now()
	o := newImageOptions(opts)
	ref := NormalizeImageRef(name)
	tarPath := filepath.Join(t.TempDir(), "rootfs.tar")
	TarRootfs(t, rootfsDir, tarPath)
	args := []string{"import", "--change", `CMD ["` + strings.Join(o.cmd, `", "`) + `"]`}
	for _, e := range o.env {
		args = append(args, "--change", "ENV "+e)
	}
	if r := c.podman.run(t, append(args, tarPath, ref)...); !r.Success() {
		t.Fatalf("importing %s into the storage of crio:\n%s", ref, r)
	}
	if r := c.MustCrictl(t, "images", "--output", "json"); !strings.Contains(r.Stdout, ref) {
		t.Fatalf("image %s not listed by crio after import:\n%s", ref, r)
	}
	t.Logf("crio import %s: %s", ref, time.Since(start).Round(time.Millisecond))
	return ref
}

// ImportCRIImage is ImportImage.
func (c *CRIO) ImportCRIImage(t testing.TB, rootfsDir, name string, opts ...ImageOption) string {
	t.Helper()
	return c.ImportImage(t, rootfsDir, name, opts...)
}

// removeAll removes every pod (and so every container) while the daemon
// still runs. Images stay in the private storage, removed with Dir.
func (c *CRIO) removeAll(t testing.TB) {
	t.Helper()
	select {
	case <-c.exited:
	default:
		removePods(t, c)
	}
}

// hugetlbUnmounted reports whether the kernel has the hugetlb cgroup
// controller (/proc/cgroups) but no hierarchy of it is mounted here, as in
// containers of this machine kind. CRI-O asks the kernel, not the mounts:
// it then passes the kubelet's hugepage limits (0 for every page size, on
// every container) to runc, which cannot set them and refuses to create the
// container. containerd tolerates a missing hugetlb controller by default.
func hugetlbUnmounted() bool {
	cgroups, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return false
	}
	enabled := false
	for _, line := range strings.Split(string(cgroups), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "hugetlb" && f[3] == "1" {
			enabled = true
		}
	}
	if !enabled {
		return false
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, " - cgroup ") && strings.Contains(line, "hugetlb") {
			return false
		}
	}
	return true
}

// hasCapSysResource reports whether this process has CAP_SYS_RESOURCE,
// which lowering a process's oom_score_adj needs.
func hasCapSysResource() bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	return false
}

// restrictedRuncWrapper is a runtime for CRI-O's runc handler that edits the
// bundle's config.json (CRI-O writes it indented; GNU sed -z edits it as one
// string) before runc reads it, for what a kubelet asks and this host
// refuses: it removes linux.resources.hugepageLimits (all 0, and not
// enforceable where hugetlbUnmounted), and raises process.oomScoreAdj to the
// caller's own value when it is lower (the kubelet gives critical pods -997;
// without CAP_SYS_RESOURCE runc cannot set that), as containerd's
// restrict_oom_score_adj does. CRI-O has neither knob.
func restrictedRuncWrapper(runc string) string {
	return `#!/bin/sh
# Written by the xpu-cdi e2e harness (crio.go, restrictedRuncWrapper).
bundle=
prev=
for a in "$@"; do
	case $prev in --bundle | -b) bundle=$a ;; esac
	case $a in --bundle=*) bundle=${a#--bundle=} ;; esac
	prev=$a
done
cfg=$bundle/config.json
if [ -n "$bundle" ] && [ -f "$cfg" ]; then
	sed -z -i \
		-e 's/,[[:space:]]*"hugepageLimits":[[:space:]]*\[[^]]*\]//' \
		-e 's/"hugepageLimits":[[:space:]]*\[[^]]*\][[:space:]]*,\{0,1\}//' \
		"$cfg" || exit 1
	cur=$(cat /proc/$$/oom_score_adj)
	want=$(sed -n 's/.*"oomScoreAdj":[[:space:]]*\(-\{0,1\}[0-9][0-9]*\).*/\1/p' "$cfg" | head -n 1)
	if [ -n "$want" ] && [ "$want" -lt "$cur" ]; then
		sed -i -e "s/\"oomScoreAdj\":[[:space:]]*$want\$/\"oomScoreAdj\": $cur/" \
			-e "s/\"oomScoreAdj\":[[:space:]]*$want\([^0-9]\)/\"oomScoreAdj\": $cur\1/" "$cfg" || exit 1
	fi
fi
exec ` + runc + ` "$@"
`
}
