package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// nullDeviceSpec is a CDI spec for vendor whose device "null" gives the
// container the host's /dev/null as /dev/e2e-null. cdiVersion 0.5.0 is the
// highest Podman 4.3.1 parses and the lowest with deviceNodes[].hostPath.
func nullDeviceSpec(vendor string) []byte {
	return []byte(fmt.Sprintf(`cdiVersion: "0.5.0"
kind: %s/e2e
devices:
  - name: "null"
    containerEdits:
      deviceNodes:
        - path: /dev/e2e-null
          hostPath: /dev/null
      env:
        - E2E_VENDOR=%s
`, vendor, vendor))
}

func TestSmokePodman(t *testing.T) {
	p := harness.NewPodman(t)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	p.ImportImage(t, rootfs, "e2e-busybox")

	t.Run("echo", func(t *testing.T) {
		r := p.MustRun(t, "run", "--rm", "e2e-busybox", "echo", "hello from podman")
		require.Equal(t, "hello from podman\n", r.Stdout)
		r = p.Run(t, "run", "--rm", "e2e-busybox", "sh", "-c", "exit 7")
		require.Equal(t, 7, r.ExitCode, r.String())
	})

	t.Run("cdi device", func(t *testing.T) {
		vendor := harness.UniqueVendor(t)
		p.InstallSpec(t, nullDeviceSpec(vendor), vendor)
		r := p.MustRun(t, "run", "--rm", "--device", vendor+"/e2e=null", "e2e-busybox",
			"sh", "-c", `ls -l /dev/e2e-null && echo "vendor=$E2E_VENDOR" && echo written > /dev/e2e-null`)
		require.Contains(t, r.Stdout, "vendor="+vendor)
		// A char device with the major:minor of /dev/null (1, 3).
		require.Regexp(t, `(?m)^c.* 1, +3 .*/dev/e2e-null$`, r.Stdout)

		// Without the spec the same request must fail: the node came from CDI.
		r = p.Run(t, "run", "--rm", "--device", harness.UniqueVendor(t)+"/e2e=null", "e2e-busybox", "true")
		require.NotZero(t, r.ExitCode, r.String())
		require.Contains(t, r.Stderr, "unresolvable CDI devices")
	})
}

func TestSmokeGlibcRootfs(t *testing.T) {
	p := harness.NewPodman(t)
	rootfs := t.TempDir()
	harness.BuildGlibcRootfs(t, rootfs)
	require.NoFileExists(t, filepath.Join(rootfs, "sbin/ldconfig"))
	// A dynamically linked host program runs inside with only the loader and libc.
	require.NoError(t, harness.CopyIntoRootfs(rootfs, "/usr/bin/env", "/usr/bin/glibc-env"))
	p.ImportImage(t, rootfs, "e2e-glibc")
	r := p.MustRun(t, "run", "--rm", "e2e-glibc", "/usr/bin/glibc-env", "E2E=glibc")
	require.Contains(t, strings.Fields(r.Stdout), "E2E=glibc")
}

// timed logs how long f took, for the setup-cost report.
func timed(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	t.Logf("setup %s: %s", what, time.Since(start).Round(time.Millisecond))
}

func TestSmokeContainerd2(t *testing.T) {
	var c *harness.Containerd
	timed(t, "containerd 2.x start", func() { c = harness.NewContainerd(t) })
	require.Regexp(t, `Server:\s+Version:\s+v?2\.`, c.MustCtr(t, "version").Stdout)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	var ref string
	timed(t, "containerd 2.x image import", func() { ref = c.ImportImage(t, rootfs, "e2e-busybox") })

	t.Run("echo", func(t *testing.T) {
		r := c.MustCtr(t, "run", "--rm", ref, "e2e-echo", "echo", "hello from containerd 2")
		require.Equal(t, "hello from containerd 2\n", r.Stdout)
	})

	t.Run("cdi device", func(t *testing.T) {
		vendor := harness.UniqueVendor(t)
		// ctr resolves --device itself from /etc/cdi and /var/run/cdi.
		harness.InstallSpec(t, nullDeviceSpec(vendor), vendor)
		r := c.MustCtr(t, "run", "--rm", "--device", vendor+"/e2e=null", ref, "e2e-cdi",
			"sh", "-c", `ls -l /dev/e2e-null && echo "vendor=$E2E_VENDOR" && echo written > /dev/e2e-null`)
		require.Contains(t, r.Stdout, "vendor="+vendor)
		require.Regexp(t, `(?m)^c.* 1, +3 .*/dev/e2e-null$`, r.Stdout)

		r = c.Ctr(t, "run", "--rm", "--device", harness.UniqueVendor(t)+"/e2e=null", ref, "e2e-cdi-missing", "true")
		require.NotZero(t, r.ExitCode, r.String())
	})

	t.Run("cri cdi device from SpecDir", func(t *testing.T) {
		harness.RequiresTool(t, filepath.Join(harness.ToolsBin(), "crictl"))
		vendor := harness.UniqueVendor(t)
		c.WriteSpec(t, nullDeviceSpec(vendor), vendor)
		timed(t, "CRI images import", func() {
			c.ImportImage(t, rootfs, harness.CRISandboxImage,
				harness.WithImageNamespace(harness.CRINamespace), harness.WithImageCmd("sleep", "2147483647"))
			c.ImportImage(t, rootfs, "e2e-busybox", harness.WithImageNamespace(harness.CRINamespace),
				harness.WithImageCmd("sleep", "2147483647"))
		})
		dir := t.TempDir()
		pod := filepath.Join(dir, "pod.json")
		ctr := filepath.Join(dir, "container.json")
		// Host network: the harness's CRI has no CNI plugins.
		require.NoError(t, os.WriteFile(pod, []byte(`{
  "metadata": {"name": "e2e-pod", "namespace": "default", "uid": "e2e-pod-uid", "attempt": 0},
  "linux": {"security_context": {"namespace_options": {"network": 2}}}
}`), 0o644))
		require.NoError(t, os.WriteFile(ctr, []byte(fmt.Sprintf(`{
  "metadata": {"name": "e2e-cdi"},
  "image": {"image": %q},
  "command": ["sleep", "2147483647"],
  "CDI_devices": [{"name": %q}]
}`, ref, vendor+"/e2e=null")), 0o644))
		id := strings.TrimSpace(c.MustCrictl(t, "run", ctr, pod).Stdout)
		r := c.MustCrictl(t, "exec", id, "sh", "-c", `ls -l /dev/e2e-null && echo "vendor=$E2E_VENDOR"`)
		require.Contains(t, r.Stdout, "vendor="+vendor)
		require.Regexp(t, `(?m)^c.* 1, +3 .*/dev/e2e-null$`, r.Stdout)
	})
}

func TestSmokeContainerd16(t *testing.T) {
	var c *harness.Containerd
	timed(t, "containerd 1.6 start", func() { c = harness.NewContainerd16(t) })
	require.Regexp(t, `Server:\s+Version:\s+v?1\.6\.`, c.MustCtr(t, "version").Stdout)
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	var ref string
	timed(t, "containerd 1.6 image import", func() { ref = c.ImportImage(t, rootfs, "e2e-busybox") })
	r := c.MustCtr(t, "run", "--rm", ref, "e2e-echo", "echo", "hello from containerd 1.6")
	require.Equal(t, "hello from containerd 1.6\n", r.Stdout)
}

func TestSmokeDockerd(t *testing.T) {
	var d *harness.Dockerd
	timed(t, "dockerd 20.10 start", func() { d = harness.NewDockerd(t, map[string]any{"log-level": "info"}) })
	require.Equal(t, "20.10", d.MustDocker(t, "version", "--format", "{{.Server.Version}}").Stdout[:5])
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	var ref string
	timed(t, "dockerd image import", func() { ref = d.ImportImage(t, rootfs, "e2e-busybox") })

	r := d.MustDocker(t, "run", "--rm", "--network", "none", ref, "echo", "hello from docker")
	require.Equal(t, "hello from docker\n", r.Stdout)
	r = d.Docker(t, "run", "--rm", "--network", "none", ref, "sh", "-c", "exit 9")
	require.Equal(t, 9, r.ExitCode, r.String())
	// A container left running is removed by the harness at cleanup.
	d.MustDocker(t, "run", "--detach", "--network", "none", ref, "sleep", "300")
}

func TestSmokeCRIO(t *testing.T) {
	var c *harness.CRIO
	timed(t, "CRI-O start", func() { c = harness.NewCRIO(t) })
	require.Regexp(t, `RuntimeName:\s+cri-o\s+RuntimeVersion:\s+1\.34\.0`, c.MustCrictl(t, "version").Stdout)
	timed(t, "CRI-O sandbox image import", func() { harness.PrepareCRI(t, c) })
	rootfs := t.TempDir()
	harness.BuildBusyboxRootfs(t, rootfs)
	ref := c.ImportCRIImage(t, rootfs, "e2e-busybox")

	t.Run("echo", func(t *testing.T) {
		var out string
		timed(t, "CRI-O pod + container", func() {
			out = harness.CRIRunToCompletion(t, c, harness.CRIContainer{Name: "e2e-echo", Image: ref, Command: []string{"echo", "hello from cri-o"}})
		})
		require.Equal(t, "hello from cri-o\n", out)
	})

	t.Run("cri cdi device from SpecDir", func(t *testing.T) {
		vendor := harness.UniqueVendor(t)
		c.WriteSpec(t, nullDeviceSpec(vendor), vendor)
		out := harness.CRIRunToCompletion(t, c, harness.CRIContainer{
			Name: "e2e-cdi", Image: ref, CDIDevices: []string{vendor + "/e2e=null"},
			Command: []string{"sh", "-c", `ls -l /dev/e2e-null && echo "vendor=$E2E_VENDOR"`},
		})
		require.Contains(t, out, "vendor="+vendor)
		require.Regexp(t, `(?m)^c.* 1, +3 .*/dev/e2e-null$`, out)
	})

	t.Run("a pod left running is removed at cleanup", func(t *testing.T) {
		harness.CRIRun(t, c, harness.CRIContainer{Name: "e2e-left", Image: ref, Command: []string{"sleep", "300"}}).RequireSuccess(t)
	})
}
