package packaging

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// trixieScript runs in every container of TestTrixieEngines: the xpu nodes
// with their numbers, the XPU variables, whether the loader cache names
// libxpurt.so.2 (the image has none: only the hook's ldconfig run makes
// one), then a program linked against libxpurt.so.2 and xpu-smi.
const trixieScript = `for n in /dev/xpu*; do [ -e "$n" ] && echo "node $n $(stat -c '%t:%T' "$n")"; done
env | grep '^XPU' | sort
if [ -s /etc/ld.so.cache ]; then echo "ldcache libxpurt: $(grep -c libxpurt.so.2 /etc/ld.so.cache)"; else echo "ldcache: none"; fi
echo "== xre5"; xpu-test-xre5; echo "== smi"; xpu-smi`

// trixieHost is the P800 host of the trixie tests (driver and XRE 5, nodes
// reached through /sys/dev/char, so every device has its PCI address) and
// the image its containers run: glibc with a program linked against
// libxpurt.so.2, no loader cache, no ldconfig.
func trixieHost(t *testing.T) (*fakehost.Tree, string) {
	t.Helper()
	tree := fakehosttest.Build(t, fakehost.P800Sysfs())
	require.True(t, tree.RealNodes, "the engines need real char devices")
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	rootfs := filepath.Join(dir, "rootfs")
	harness.BuildGlibcRootfs(t, rootfs)
	require.NoError(t, fakehost.BuildTestProgramXRE5(filepath.Join(rootfs, "usr", "bin", "xpu-test-xre5"),
		fakehost.WithCacheDir(fakehosttest.CacheDir(t))))
	return tree, rootfs
}

// trixieWant is one way of asking for devices and the host's nodes it
// must give: the /dev/xpuN of the host devices idx.
type trixieWant struct {
	name string
	idx  []int
}

// trixieWants are the three ways: by index, by PCI address (0000:01:00.0
// is /dev/xpu3 on this host) and all.
var trixieWants = []trixieWant{
	{name: "0", idx: []int{0}},
	{name: "0000:01:00.0", idx: []int{3}},
	{name: "all", idx: []int{0, 1, 2, 3, 4, 5, 6, 7}},
}

// checkTrixieContainer checks what trixieScript printed in a container
// given the devices of w: exactly their nodes and the control node, with
// the host's numbers, each device's variable, the hook's loader cache, the
// XRE program and xpu-smi running.
func checkTrixieContainer(t *testing.T, tree *fakehost.Tree, w trixieWant, out string) {
	t.Helper()
	want := map[string]string{"/dev/xpuctrl": nodeNumber(t, tree.Path("/dev/xpuctrl"))}
	var wantEnv []string
	for _, i := range w.idx {
		want[fmt.Sprintf("/dev/xpu%d", i)] = nodeNumber(t, tree.Path(fmt.Sprintf("/dev/xpu%d", i)))
		wantEnv = append(wantEnv, fmt.Sprintf("XPU_CDI_DEVICE_%d=%s", i, tree.Host.Devices[i].BDF))
	}
	sort.Strings(wantEnv)
	got := map[string]string{}
	var env []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "node" {
			got[f[1]] = f[2]
		}
		if strings.HasPrefix(line, "XPU_CDI_DEVICE_") {
			env = append(env, line)
		}
	}
	require.Equal(t, want, got, "exactly the devices asked for and xpuctrl:\n%s", out)
	require.Equal(t, wantEnv, env, out)
	require.Regexp(t, regexp.MustCompile(`ldcache libxpurt: [1-9]`), out, "the hook's loader cache names libxpurt.so.2")
	require.Contains(t, out, fmt.Sprintf("xpu devices: %d\nxpurt version: %s\n", len(w.idx), fakehost.XREVersionP800), "the XRE program runs")
	require.Contains(t, out, "XPU-SMI 5 (xpu-cdi fake host)")
	require.Contains(t, out, fmt.Sprintf("%d device(s) found", len(w.idx)))
}

// nodeNumber is a node's number as `stat -c '%t:%T'` prints it.
func nodeNumber(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	return fmt.Sprintf("%x:%x", unix.Major(st.Rdev), unix.Minor(st.Rdev))
}

// trixieInstall copies the .deb where the chroot sees it and installs it
// the way a user does, `apt install ./xpu-cdi_*.deb`, with the fake host's
// roots in the environment (no systemd runs in the chroot: the postinst
// writes the spec itself, with the installed xpu-cdi).
func trixieInstall(t *testing.T, tr *harness.Trixie, deb string, tree *fakehost.Tree) harness.Result {
	t.Helper()
	dir := filepath.Join(tr.Dir, "debs", strings.TrimSuffix(filepath.Base(deb), ".deb"))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	copyFile(t, deb, filepath.Join(dir, filepath.Base(deb)))
	return tr.MustRun(t, []string{
		"DEBIAN_FRONTEND=noninteractive", "XPU_CDI_DEV_ROOT=" + tree.Root, "XPU_CDI_DRIVER_ROOT=" + tree.Root,
	}, "sh", "-c", "cd "+dir+" && apt-get install -y --no-install-recommends ./xpu-cdi_*.deb")
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// TestTrixieEngines installs the .deb with apt on a Debian 13 host (a
// chroot of trixie's own packages) whose hardware is the fake P800 host,
// and starts containers on trixie's Podman 5.4, Docker 26 (Engine API,
// CDI on through `xpu-cdi runtime configure`) and containerd 1.7 (CRI,
// enable_cdi) three ways each: baidu.com/xpu=0, by PCI address and all.
func TestTrixieEngines(t *testing.T) {
	p := packages(t)
	tr := harness.NewTrixie(t)
	tree, rootfs := trixieHost(t)

	out := trixieInstall(t, tr, p.deb, tree)
	t.Logf("apt install:\n%s", out.Stdout)
	spec, err := tr.ReadFile(t, cdispec.DefaultSpecPath)
	require.NoError(t, err, "the postinst writes the spec at %s", cdispec.DefaultSpecPath)
	require.Contains(t, string(spec), "kind: baidu.com/xpu")
	require.Contains(t, string(spec), "path: /usr/bin/xpu-runtime-hook", "the packaged hook")
	require.Contains(t, string(spec), tree.Root+"/dev/xpu0", "host paths of the fake host")
	_, err = tr.ReadFile(t, cdispec.LegacySpecPath)
	require.ErrorIs(t, err, os.ErrNotExist, "nothing at the old path")
	list := tr.MustRun(t, nil, "xpu-cdi", "list")
	require.Contains(t, list.Stdout, "baidu.com/xpu=0000:01:00.0\n")
	require.NotContains(t, list.Stderr, "shadow")

	versions := tr.MustRun(t, nil, "dpkg-query", "-W", "podman", "docker.io", "containerd", "runc").Stdout
	t.Logf("trixie engines:\n%s", versions)

	t.Run("podman", func(t *testing.T) {
		pm := tr.Podman(t)
		require.Contains(t, pm.MustRun(t, "--version").Stdout, "podman version 5.")
		image := pm.ImportImage(t, rootfs, "xpu-trixie")
		for _, w := range trixieWants {
			r := pm.MustRun(t, "run", "--rm", "--device", "baidu.com/xpu="+w.name, image, "sh", "-c", trixieScript)
			checkTrixieContainer(t, tree, w, r.Stdout)
		}
		// Without a device nothing of the XPUs is there: what the
		// containers saw above is the spec's and the hook's doing.
		r := pm.MustRun(t, "run", "--rm", image, "sh", "-c", trixieScript+"; true")
		require.Contains(t, r.Stdout, "ldcache: none")
		require.NotContains(t, r.Stdout, "node /dev/xpu")
	})

	t.Run("docker", func(t *testing.T) {
		conf := tr.MustRun(t, nil, "xpu-cdi", "runtime", "configure", "--runtime", "docker")
		require.Contains(t, conf.Stdout+conf.Stderr, "mode cdi", "Docker 26 gets its own CDI: %s", conf)
		daemon, err := tr.ReadFile(t, "/etc/docker/daemon.json")
		require.NoError(t, err)
		require.Contains(t, string(daemon), `"cdi": true`)
		require.NotContains(t, string(daemon), "xpu-container-runtime", "no shim with Docker's own CDI")

		d := tr.Dockerd(t)
		api := harness.DockerAPI(d.Socket)
		ctx := context.Background()
		v, err := api.Version(ctx)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(v.Version, "26."), "trixie's docker.io: %s", v.Version)
		tarPath := filepath.Join(tr.Dir, "image.tar")
		harness.TarRootfs(t, rootfs, tarPath)
		require.NoError(t, api.ImportImage(ctx, tarPath, "xpu-trixie"))
		for _, w := range trixieWants {
			code, out, err := api.RunToCompletion(ctx, harness.DockerRun{
				Image: "xpu-trixie", Cmd: []string{"sh", "-c", trixieScript}, CDIDevices: []string{"baidu.com/xpu=" + w.name},
			})
			require.NoError(t, err, "%s: %s", w.name, d.Log())
			require.Zero(t, code, "%s: %s", w.name, out)
			checkTrixieContainer(t, tree, w, out)
		}
		// A name the spec does not have is refused by the daemon.
		_, _, err = api.RunToCompletion(ctx, harness.DockerRun{
			Image: "xpu-trixie", Cmd: []string{"true"}, CDIDevices: []string{"baidu.com/xpu=99"},
		})
		require.Error(t, err)
		require.Contains(t, err.Error(), "baidu.com/xpu=99")

		// --revert gives back Docker's configuration as it was.
		tr.MustRun(t, nil, "xpu-cdi", "runtime", "configure", "--runtime", "docker", "--revert")
		daemon, err = tr.ReadFile(t, "/etc/docker/daemon.json")
		if err == nil {
			require.NotContains(t, string(daemon), `"cdi"`)
		} else {
			require.ErrorIs(t, err, os.ErrNotExist)
		}
	})

	t.Run("containerd", func(t *testing.T) {
		c := tr.Containerd(t, tr.ContainerdConfig17)
		require.Contains(t, tr.MustRun(t, nil, "containerd", "--version").Stdout, " 1.7.")
		harness.PrepareCRI(t, c)
		image := c.ImportCRIImage(t, rootfs, "xpu-trixie")
		for i, w := range trixieWants {
			out := harness.CRIRunToCompletion(t, c, harness.CRIContainer{
				Name: fmt.Sprintf("xpu-trixie-%d", i), Image: image, Command: []string{"sh", "-c", trixieScript},
				CDIDevices: []string{"baidu.com/xpu=" + w.name},
			})
			checkTrixieContainer(t, tree, w, out)
		}
	})
}

// previousCommitEnv names the commit TestTrixieUpgrade builds the earlier
// package from; by default previousCommit, the last commit whose packages
// kept the spec in /var/run/cdi, so the upgrade crosses the move of the
// spec to /etc/cdi.
const (
	previousCommitEnv = "XPU_CDI_PREVIOUS_COMMIT"
	previousCommit    = "9ea2d8f2b912430630a8cd0131cf11e00800d41e"
)

// previousDeb builds the .deb of an earlier commit (a copy of its tree from
// git archive, staged and packaged by its own scripts) with a version that
// sorts before every build of this tree's (0.0.0~prev...).
func previousDeb(t *testing.T) string {
	t.Helper()
	requireTools(t, "git", "tar", "go", "dpkg-buildpackage")
	root := repoRoot(t)
	commit := previousCommit
	if c := os.Getenv(previousCommitEnv); c != "" {
		commit = c
	}
	if _, err := runErr(nil, "git", "-C", root, "cat-file", "-e", commit+"^{commit}"); err != nil {
		t.Fatalf("the commit %s to build the earlier package from is not in this clone (%s); fetch the history or set %s", commit, root, previousCommitEnv)
	}
	short := strings.TrimSpace(run(t, nil, "git", "-C", root, "rev-parse", "--short", commit))
	work := t.TempDir()
	src, stage, dist := filepath.Join(work, "src"), filepath.Join(work, "stage"), filepath.Join(work, "dist")
	require.NoError(t, os.Mkdir(src, 0o755))
	run(t, nil, "sh", "-c", "git -C \"$1\" archive --format=tar \"$2\" | tar -x -C \"$3\"", "sh", root, commit, src)
	version := "0.0.0~prev." + short
	env := []string{"VERSION=v0.0.0-prev-" + short, "COMMIT=" + short}
	run(t, env, filepath.Join(src, "packaging", "stage.sh"), stage)
	run(t, env, filepath.Join(src, "packaging", "deb", "build.sh"), stage, dist, version)
	debs, err := filepath.Glob(filepath.Join(dist, "xpu-cdi_"+version+"_*.deb"))
	require.NoError(t, err)
	require.Len(t, debs, 1, "the earlier package in %s", dist)
	return debs[0]
}

// TestTrixieUpgrade installs the package of an earlier build on the Debian
// 13 host, upgrades it to this build's with apt, and purges it: the units
// stay enabled across the upgrade, the spec moves from /var/run/cdi to
// /etc/cdi (no stale copy left to shadow it), the hook is there while the
// package is, and the purge leaves none of them.
func TestTrixieUpgrade(t *testing.T) {
	p := packages(t)
	old := previousDeb(t)
	tr := harness.NewTrixie(t)
	tree, rootfs := trixieHost(t)
	units := []string{"xpu-cdi-refresh.service", "xpu-cdi-refresh.path", "xpu-cdi-partitions.service"}
	exists := func(path string) bool {
		_, err := os.Lstat(tr.HostPath(path))
		if err != nil {
			require.ErrorIs(t, err, os.ErrNotExist, path)
		}
		return err == nil
	}
	requireInstalled := func(stage string) {
		t.Helper()
		for _, u := range units {
			require.True(t, exists("/lib/systemd/system/"+u), "%s: unit %s", stage, u)
			require.True(t, exists("/etc/systemd/system/multi-user.target.wants/"+u), "%s: unit %s enabled", stage, u)
		}
		require.True(t, exists("/usr/bin/xpu-runtime-hook"), "%s: the hook", stage)
	}

	trixieInstall(t, tr, old, tree)
	requireInstalled("earlier package")
	require.True(t, exists(cdispec.LegacySpecPath), "the earlier package's spec path")
	require.False(t, exists(cdispec.DefaultSpecPath))

	trixieInstall(t, tr, p.deb, tree)
	requireInstalled("upgraded")
	require.Equal(t, p.version, strings.TrimSpace(tr.MustRun(t, nil, "dpkg-query", "-W", "-f=${Version}", "xpu-cdi").Stdout))
	require.True(t, exists(cdispec.DefaultSpecPath), "the upgrade writes the spec at %s", cdispec.DefaultSpecPath)
	require.False(t, exists(cdispec.LegacySpecPath), "the upgrade removes the spec at the old path, which would shadow the new one")
	unit, err := tr.ReadFile(t, "/lib/systemd/system/xpu-cdi-refresh.service")
	require.NoError(t, err)
	require.Contains(t, string(unit), "Environment=XPU_CDI_OUTPUT="+cdispec.DefaultSpecPath+"\n")
	list := tr.MustRun(t, nil, "xpu-cdi", "list")
	require.NotContains(t, list.Stderr, "shadowed")
	require.Contains(t, list.Stdout, "baidu.com/xpu=all\n")
	// The upgraded spec serves Podman 5.
	pm := tr.Podman(t)
	image := pm.ImportImage(t, rootfs, "xpu-trixie-upgrade")
	r := pm.MustRun(t, "run", "--rm", "--device", "baidu.com/xpu=0", image, "sh", "-c", trixieScript)
	checkTrixieContainer(t, tree, trixieWants[0], r.Stdout)

	tr.MustRun(t, []string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", "purge", "-y", "xpu-cdi")
	for _, u := range units {
		require.False(t, exists("/lib/systemd/system/"+u), "purged: unit %s", u)
		require.False(t, exists("/etc/systemd/system/multi-user.target.wants/"+u), "purged: unit %s link", u)
	}
	for _, path := range []string{
		"/usr/bin/xpu-runtime-hook", "/usr/bin/xpu-cdi", cdispec.DefaultSpecPath, cdispec.LegacySpecPath,
		"/etc/xpu-container-toolkit", "/etc/xpu-cdi",
	} {
		require.False(t, exists(path), "purged: %s", path)
	}
}
