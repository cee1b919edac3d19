package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// CRI is an engine serving the Kubernetes Container Runtime Interface,
// driven through crictl: containerd 2.x (NewContainerd) and CRI-O
// (NewCRIO). Tests written against it run unchanged on both; the helpers
// below (PrepareCRI, CRIRun, CRIRunToCompletion) take one.
type CRI interface {
	// EngineName names the engine in subtest names and logs.
	EngineName() string
	// Endpoint is the CRI endpoint ("unix:///tmp/xe2e-.../crio.sock"), for
	// clients other than crictl (a kubelet's --container-runtime-endpoint).
	Endpoint() string
	// CgroupParent is the cgroup parent of the pods CRIRun creates ("" for
	// the engine's default). An engine that leaves cgroups behind when a
	// create fails gets one of its own, removed with the engine, as kubelet
	// removes the pod cgroups it hands out.
	CgroupParent() string
	// Crictl runs crictl against the engine; a non-zero exit is returned.
	Crictl(t testing.TB, args ...string) Result
	// MustCrictl is Crictl that fails the test unless crictl exits 0.
	MustCrictl(t testing.TB, args ...string) Result
	// ImportCRIImage imports the rootfs dir as image name where the CRI
	// finds it and returns the reference to put in a container config.
	ImportCRIImage(t testing.TB, rootfsDir, name string, opts ...ImageOption) string
	// SpecDir is the CDI spec directory the engine's CRI reads.
	SpecDir() string
	// WriteSpec writes a test vendor's CDI spec into SpecDir().
	WriteSpec(t testing.TB, spec []byte, vendor string) string
	// CNIConfDir is the CNI configuration directory the engine's CRI reads
	// (private, empty unless a test writes into it; NewCluster does).
	CNIConfDir() string
	// Restart stops the daemon and starts it again with the same files.
	Restart(t testing.TB)
	// Log is the daemon's log so far.
	Log() string
}

var _ CRI = (*Containerd)(nil)

// CRITimeout bounds how long CRIRunToCompletion waits for a container to
// exit.
const CRITimeout = 30 * time.Second

// PrepareCRI imports the sandbox image (CRISandboxImage, a busybox root
// whose Cmd sleeps) that the engine's pods need: there is no registry.
func PrepareCRI(t testing.TB, cri CRI) {
	t.Helper()
	rootfs := t.TempDir()
	BuildBusyboxRootfs(t, rootfs)
	cri.ImportCRIImage(t, rootfs, CRISandboxImage, WithImageCmd("sleep", "2147483647"))
}

// CRIContainer is one container in a pod of its own, on the host network
// (the harness's CRI engines have no CNI configuration) and with a PID
// namespace of its own.
type CRIContainer struct {
	// Name is the pod's and the container's name (unique within the
	// engine while the pod exists).
	Name    string
	Image   string
	Command []string
	Env     map[string]string
	// CDIDevices go to the CRI CDI_devices field (fully qualified names).
	CDIDevices []string
	// Annotations are the container's annotations (e.g. cdi.k8s.io/...).
	Annotations map[string]string
	// PodAnnotations are the pod sandbox's annotations: what the kubelet
	// passes from a pod's metadata.annotations, which its author writes.
	PodAnnotations map[string]string
	// Mounts are the container's CRI mounts (a device plugin's Mounts
	// answer, as the kubelet passes it).
	Mounts []CRIMount
	// AddCapabilities are added to the engine's default set ("SYS_ADMIN").
	AddCapabilities []string
	// RuntimeHandler selects the engine's runtime handler ("" for its
	// default), `crictl run --runtime`.
	RuntimeHandler string
}

// CRIMount is one CRI mount of a host path.
type CRIMount struct {
	ContainerPath, HostPath string
	ReadOnly                bool
}

// criConfigs writes the pod and container configs of c for crictl and
// returns their paths; the pod logs to a directory of the test and has the
// cgroup parent cgroupParent.
func criConfigs(t testing.TB, c CRIContainer, cgroupParent string) (podPath, ctrPath string) {
	t.Helper()
	dir := t.TempDir()
	logDir := filepath.Join(dir, "logs")
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatalf("creating %s: %v", logDir, err)
	}
	pod := map[string]any{
		"metadata":      map[string]any{"name": c.Name, "namespace": "default", "uid": c.Name + "-uid", "attempt": 0},
		"annotations":   c.PodAnnotations,
		"log_directory": logDir,
		// Host network (2, NODE); a PID namespace per container (1,
		// CONTAINER), what kubelet asks for unless a pod shares its process
		// namespace: CRI-O then runs no infra container, whose
		// oom_score_adj of -998 hosts without CAP_SYS_RESOURCE refuse.
		"linux": map[string]any{
			"cgroup_parent":    cgroupParent,
			"security_context": map[string]any{"namespace_options": map[string]any{"network": 2, "pid": 1}},
		},
	}
	envs := []map[string]string{}
	for k, v := range c.Env {
		envs = append(envs, map[string]string{"key": k, "value": v})
	}
	mounts := []map[string]any{}
	for _, m := range c.Mounts {
		mounts = append(mounts, map[string]any{"container_path": m.ContainerPath, "host_path": m.HostPath, "readonly": m.ReadOnly})
	}
	devices := []map[string]string{}
	for _, d := range c.CDIDevices {
		devices = append(devices, map[string]string{"name": d})
	}
	ctr := map[string]any{
		"metadata":    map[string]any{"name": c.Name},
		"image":       map[string]any{"image": c.Image},
		"command":     c.Command,
		"envs":        envs,
		"annotations": c.Annotations,
		"CDI_devices": devices,
		"mounts":      mounts,
		"log_path":    "ctr.log",
		"linux": map[string]any{"security_context": map[string]any{
			"capabilities":      map[string]any{"add_capabilities": c.AddCapabilities},
			"namespace_options": map[string]any{"network": 2, "pid": 1},
		}},
	}
	podPath, ctrPath = filepath.Join(dir, "pod.json"), filepath.Join(dir, "ctr.json")
	for path, v := range map[string]any{podPath: pod, ctrPath: ctr} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encoding %s: %v", path, err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatalf("writing %s: %v", path, err)
		}
	}
	return podPath, ctrPath
}

// CRIRun creates c's pod and container and starts it (`crictl run`); the
// container ID is the trimmed stdout of a successful result. A refusal is
// returned, not a failure. The pod is removed at the end of the test (or
// earlier with CRIRemovePod).
func CRIRun(t testing.TB, cri CRI, c CRIContainer) Result {
	t.Helper()
	podPath, ctrPath := criConfigs(t, c, cri.CgroupParent())
	args := []string{"run"}
	if c.RuntimeHandler != "" {
		args = append(args, "--runtime", c.RuntimeHandler)
	}
	t.Cleanup(func() { CRIRemovePod(t, cri, c.Name) })
	return cri.Crictl(t, append(args, ctrPath, podPath)...)
}

// CRIRemovePod removes the pods named name (crictl run leaves a pod behind
// when the container create fails).
func CRIRemovePod(t testing.TB, cri CRI, name string) {
	t.Helper()
	removePods(t, cri, "--name", "^"+name+"$")
}

// removePods removes the pods that `crictl pods` lists with filter. Their
// containers are stopped first without a grace period: a sleep running as
// PID 1 ignores SIGTERM, and CRI-O would wait for its stop timeout.
func removePods(t testing.TB, cri CRI, filter ...string) {
	t.Helper()
	r := cri.Crictl(t, append([]string{"pods", "--quiet"}, filter...)...)
	if !r.Success() {
		t.Errorf("listing pods of %s:\n%s", cri.EngineName(), r)
		return
	}
	for _, pod := range strings.Fields(r.Stdout) {
		if ids := strings.Fields(cri.Crictl(t, "ps", "--quiet", "--pod", pod).Stdout); len(ids) > 0 {
			cri.Crictl(t, append([]string{"stop", "--timeout", "0"}, ids...)...)
		}
		if r := cri.Crictl(t, "rmp", "--force", pod); !r.Success() {
			t.Errorf("removing pod %s of %s:\n%s", pod, cri.EngineName(), r)
		}
	}
}

// CRIRunToCompletion runs c (CRIRun), waits up to CRITimeout for it to exit,
// fails the test unless it started and exited 0, removes its pod and
// returns what it wrote to stdout and stderr.
func CRIRunToCompletion(t testing.TB, cri CRI, c CRIContainer) string {
	t.Helper()
	_, out := CRIRunToExit(t, cri, c)
	CRIRemovePod(t, cri, c.Name)
	return out
}

// CRIRunToExit is CRIRunToCompletion that keeps the exited container, for
// `crictl inspect`: it returns the container ID and the output, and the pod
// is removed at the end of the test (or earlier with CRIRemovePod).
func CRIRunToExit(t testing.TB, cri CRI, c CRIContainer) (id, output string) {
	t.Helper()
	id = strings.TrimSpace(CRIRun(t, cri, c).RequireSuccess(t).Stdout)
	deadline := time.Now().Add(CRITimeout)
	for {
		// A failed inspect is "not yet": the last one is in the timeout's message.
		r := cri.Crictl(t, "inspect", "--output", "go-template", "--template", "{{.status.state}} {{.status.exitCode}}", id)
		state := strings.TrimSpace(r.Stdout)
		if !r.Success() {
			state = r.String()
		}
		if r.Success() && strings.HasPrefix(state, "CONTAINER_EXITED") {
			logs := cri.MustCrictl(t, "logs", id)
			if state != "CONTAINER_EXITED 0" {
				t.Fatalf("%s container %s: %s; output:\n%s%s", cri.EngineName(), c.Name, state, logs.Stdout, logs.Stderr)
			}
			return id, logs.Stdout + logs.Stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s container %s still %q after %s", cri.EngineName(), c.Name, state, CRITimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// String describes the container for failure messages.
func (c CRIContainer) String() string {
	return fmt.Sprintf("%s (image %s, handler %q, CDI_devices %v, annotations %v, pod annotations %v, mounts %v)",
		c.Name, c.Image, c.RuntimeHandler, c.CDIDevices, c.Annotations, c.PodAnnotations, c.Mounts)
}
