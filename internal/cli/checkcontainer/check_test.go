package checkcontainer_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/checkcontainer"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// containerRoot makes a container root with char nodes /dev/xpuN (major
// 195, minor N) for each n of xpus and, if ctrl, /dev/xpuctrl (ctrlMajor:255),
// and /usr/local/bin/xpu-smi, a copy of the ELF file smi (not run: --root
// is not /); "" for the host's static busybox.
func containerRoot(t *testing.T, xpus []int, ctrl bool, ctrlMajor uint32, smi string) string {
	t.Helper()
	testreq.Root(t, "mknod of the XPU device nodes")
	root := t.TempDir()
	dev := filepath.Join(root, "dev")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	for _, n := range xpus {
		require.NoError(t, unix.Mknod(filepath.Join(dev, "xpu"+string(rune('0'+n))), unix.S_IFCHR|0o666, int(unix.Mkdev(195, uint32(n)))))
	}
	if ctrl {
		require.NoError(t, unix.Mknod(filepath.Join(dev, "xpuctrl"), unix.S_IFCHR|0o666, int(unix.Mkdev(ctrlMajor, 255))))
	}
	if smi == "" {
		smi = testenv.HostBusybox
	}
	self, err := os.ReadFile(smi)
	if errors.Is(err, fs.ErrNotExist) {
		testreq.Missing(t, "%s: not on this machine (make deps installs busybox-static)", smi)
	}
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr", "local", "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr", "local", "bin", "xpu-smi"), self, 0o755))
	return root
}

func TestCheckContainer(t *testing.T) {
	for _, tc := range []struct {
		description string
		xpus        []int
		ctrl        bool
		ctrlMajor   uint32
		args        []string
		smi         string // "": static
		fails       []string
	}{
		{description: "one XPU", xpus: []int{3}, ctrl: true, ctrlMajor: 195},
		{description: "two XPUs asked and seen", xpus: []int{0, 1}, ctrl: true, ctrlMajor: 195, args: []string{"--devices", "2"}},
		{description: "two XPUs seen, one asked", xpus: []int{0, 1}, ctrl: true, ctrlMajor: 195, fails: []string{"sees 2 XPU device node(s) in /dev, not 1"}},
		{description: "no XPU", ctrl: true, ctrlMajor: 195, fails: []string{"sees 0 XPU device node(s)"}},
		{description: "no control node", xpus: []int{0}, fails: []string{"/dev/xpuctrl: lstat", "no such file or directory"}},
		{description: "control node of another driver", xpus: []int{0}, ctrl: true, ctrlMajor: 10, fails: []string{"major 10, but an XPU node has major 195"}},
		{description: "no xpu-smi", xpus: []int{0}, ctrl: true, ctrlMajor: 195, args: []string{"--xpu-smi", "/opt/none"}, fails: []string{"xpu-smi /opt/none: /opt/none not found"}},
		{description: "xpu-smi not checked", xpus: []int{0}, ctrl: true, ctrlMajor: 195, args: []string{"--xpu-smi", "/opt/none", "--no-xpu-smi"}},
		// XRE 5's xpu-smi in a FROM-scratch image: it cannot run, and the
		// check fails rather than passing without running it.
		{description: "dynamic xpu-smi without its interpreter", xpus: []int{0}, ctrl: true, ctrlMajor: 195, smi: "/bin/true", fails: []string{
			"xpu-smi /usr/local/bin/xpu-smi: xpu-smi cannot run here: /usr/local/bin/xpu-smi is linked dynamically and this container has no /lib64/ld-linux-x86-64.so.2, its ELF interpreter",
			"the chart's tests.image",
		}},
	} {
		if tc.smi != "" && runtime.GOARCH != "amd64" {
			continue // the interpreter the case names is x86-64's
		}
		t.Run(tc.description, func(t *testing.T) {
			root := containerRoot(t, tc.xpus, tc.ctrl, tc.ctrlMajor, tc.smi)
			stdout, _, err := clitest.Run(t, checkcontainer.NewCommand, append([]string{"check-container", "--root", root}, tc.args...)...)
			if len(tc.fails) == 0 {
				require.NoError(t, err, stdout)
				require.NotContains(t, stdout, "FAIL")
				return
			}
			require.Error(t, err, stdout)
			if tc.smi != "" {
				require.ErrorIs(t, err, checkcontainer.ErrNoInterpreter)
			}
			for _, f := range tc.fails {
				require.Contains(t, err.Error(), f)
				require.Contains(t, stdout, f)
			}
		})
	}
}

// TestCheckContainerNodeTypes: a regular file or a symlink to a char
// device is not an XPU node (no root needed).
func TestCheckContainerNodeTypes(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "dev")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dev, "xpu0"), nil, 0o644))
	require.NoError(t, os.Symlink("/dev/null", filepath.Join(dev, "xpuctrl")))
	stdout, _, err := clitest.Run(t, checkcontainer.NewCommand, "check-container", "--root", root, "--no-xpu-smi")
	require.Error(t, err)
	require.Contains(t, err.Error(), "/dev/xpu0 is not a character device")
	require.Contains(t, err.Error(), "/dev/xpuctrl is not a character device (L")
	require.Contains(t, stdout, "--   xpu-smi: not checked")
}

func TestCheckContainerFlags(t *testing.T) {
	_, _, err := clitest.Run(t, checkcontainer.NewCommand, "check-container", "--devices", "0")
	require.ErrorContains(t, err, "--devices 0: must be 1 or more")
	_, _, err = clitest.Run(t, checkcontainer.NewCommand, "check-container", "--root", "rel")
	require.ErrorContains(t, err, `--root "rel": must be an absolute path`)
}

// TestCheckContainerCopyTo: --copy-to copies the running executable to a
// new file, executable, and never over an existing file or through a link.
func TestCheckContainerCopyTo(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "xpu-cdi")
	_, _, err := clitest.Run(t, checkcontainer.NewCommand, "check-container", "--copy-to", dst)
	require.NoError(t, err)
	self, err := os.ReadFile("/proc/self/exe")
	require.NoError(t, err)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, self, got)
	fi, err := os.Stat(dst)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())

	_, _, err = clitest.Run(t, checkcontainer.NewCommand, "check-container", "--copy-to", dst)
	require.ErrorIs(t, err, fs.ErrExist, "never over an existing file")
	link := filepath.Join(dir, "link")
	target := filepath.Join(dir, "target")
	require.NoError(t, os.Symlink(target, link))
	_, _, err = clitest.Run(t, checkcontainer.NewCommand, "check-container", "--copy-to", link)
	require.ErrorContains(t, err, "--copy-to "+link)
	require.NoFileExists(t, target, "no file made through the link")
	_, _, err = clitest.Run(t, checkcontainer.NewCommand, "check-container", "--copy-to", "rel")
	require.ErrorContains(t, err, `--copy-to "rel": must be an absolute path`)
}
