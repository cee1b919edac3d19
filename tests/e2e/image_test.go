package e2e

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// TestMakeImage runs `make image` (deployments/Containerfile, FROM scratch)
// with a private Podman storage: nothing is pulled; the result is a
// manifest list of an amd64 and an arm64 image, each holding the five
// static binaries of its machine and running the device plugin by default;
// the list's name runs the host's image.
func TestMakeImage(t *testing.T) {
	p := harness.NewPodman(t)
	harness.RequiresTool(t, "make")
	bin := t.TempDir()
	// The harness's Podman (private root and configuration) as $(PODMAN).
	dir := filepath.Dir(p.ConfPath)
	wrapper := filepath.Join(t.TempDir(), "podman")
	require.NoError(t, os.WriteFile(wrapper, []byte(fmt.Sprintf(`#!/bin/sh
export CONTAINERS_CONF=%[1]s CONTAINERS_STORAGE_CONF=%[2]s CONTAINERS_REGISTRIES_CONF=%[3]s
exec podman --root %[4]s --runroot %[5]s "$@"
`, p.ConfPath, filepath.Join(dir, "storage.conf"), filepath.Join(dir, "registries.conf"), p.Root, p.RunRoot)), 0o755))

	const image = "localhost/xpu-cdi:e2e"
	// make image runs make build (static binaries into BINDIR) first.
	cmd := exec.Command("make", "image", "PODMAN="+wrapper, "IMAGE="+image, "BINDIR="+bin)
	cmd.Dir = moduleRoot(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make image:\n%s", out)
	require.Contains(t, string(out), "FROM scratch")

	r := p.MustRun(t, "manifest", "inspect", image)
	var list struct {
		Manifests []struct {
			Platform struct{ Architecture, OS string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &list), r.Stdout)
	var platforms []string
	for _, m := range list.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	require.ElementsMatch(t, []string{"linux/amd64", "linux/arm64"}, platforms)
	// The tag the plain manifests name is the same list.
	latest := p.MustRun(t, "manifest", "inspect", "localhost/xpu-cdi:latest")
	require.Equal(t, r.Stdout, latest.Stdout, "make image tags the list localhost/xpu-cdi:latest too")
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for arch, machine := range machines {
		r = p.MustRun(t, "image", "inspect", "--format", "{{.Architecture}} {{len .RootFS.Layers}} {{.Config.Entrypoint}}", image+"-"+arch)
		require.Equal(t, arch+" 1 [/usr/bin/xpu-device-plugin]", strings.TrimSpace(r.Stdout), "one layer: the binaries, nothing from a base image")
		// The binaries are the ones of that machine (copied out: the
		// other machine's cannot run here without an emulator).
		ctr := strings.TrimSpace(p.MustRun(t, "create", image+"-"+arch).Stdout)
		out := t.TempDir()
		for _, name := range shippedBinaries(t, "image") {
			p.MustRun(t, "cp", ctr+":/usr/bin/"+name, filepath.Join(out, name))
			f, err := elf.Open(filepath.Join(out, name))
			require.NoError(t, err)
			require.Equal(t, machine, f.Machine, "%s in the %s image", name, arch)
			require.NoError(t, f.Close())
		}
		p.MustRun(t, "rm", ctr)
	}

	r = p.MustRun(t, "run", "--rm", image, "--version")
	require.Contains(t, r.Stdout, "xpu-device-plugin version")
	for _, name := range []string{"xpu-cdi", "xpu-runtime-hook", "xpu-dra-driver"} {
		r = p.MustRun(t, "run", "--rm", "--entrypoint", "/usr/bin/"+name, image, "--version")
		require.Contains(t, r.Stdout+r.Stderr, name, name)
	}
	// The shim runs (static) and looks for runc, which the image does not have.
	r = p.Run(t, "run", "--rm", "--entrypoint", "/usr/bin/xpu-container-runtime", image, "--version")
	require.Contains(t, r.Stderr, "xpu-container-runtime: no low-level OCI runtime found", r.String())
	// No shell: FROM scratch.
	r = p.Run(t, "run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "true")
	require.NotZero(t, r.ExitCode, r.String())
}
