package checkcontainer_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/checkcontainer"
	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// containerRoot makes a container root with char nodes /dev/xpuN (major
// 195, minor N) for each n of xpus and, if ctrl, /dev/xpuctrl (ctrlMajor:255),
// and /usr/local/bin/xpu-smi, a copy of this test binary (an ELF file
// that is not run: --root is not /).
func containerRoot(t *testing.T, xpus []int, ctrl bool, ctrlMajor uint32) string {
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
	self, err := os.ReadFile("/proc/self/exe")
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
	} {
		t.Run(tc.description, func(t *testing.T) {
			root := containerRoot(t, tc.xpus, tc.ctrl, tc.ctrlMajor)
			stdout, _, err := clitest.Run(t, checkcontainer.NewCommand, append([]string{"check-container", "--root", root}, tc.args...)...)
			if len(tc.fails) == 0 {
				require.NoError(t, err, stdout)
				require.NotContains(t, stdout, "FAIL")
				return
			}
			require.Error(t, err, stdout)
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
