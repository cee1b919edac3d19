package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// syslogActionSizeUnread is syslog(2)'s SYSLOG_ACTION_SIZE_UNREAD: the
// bytes of the kernel log not yet read through /proc/kmsg. Asking does not
// read anything.
const syslogActionSizeUnread = 9

// TestHookNeverReadsKernelFiles reproduces the attack "/proc/kmsg through an image link"
// (docs/security.md, "Attacks the tests reproduce") under real runc: the
// image's library folder holds links to /proc/kmsg (absolute and relative),
// which resolve inside the root to the container's procfs, mounted when the
// hook runs as root. /proc/kmsg is a regular file, and a read of it takes
// the messages from every /proc/kmsg reader of the host. The hook must not
// read it: the host's unread kernel log (a marker written to /dev/kmsg just
// before) is still unread after the container started, and the container has
// its XPU.
func TestHookNeverReadsKernelFiles(t *testing.T) {
	harness.RequiresRoot(t)
	tree := FakeHost(t, fakehost.P800x8())
	wrapper, _ := shimRuntime(t, tree, "")
	state := t.TempDir()
	rootfs := glibcRootfs(t)
	lib := filepath.Join(rootfs, "usr", "local", "xpu", "lib64")
	require.NoError(t, os.MkdirAll(lib, 0o755))
	for i, target := range []string{"/proc/kmsg", "../../../../proc/kmsg", "/proc/self/root/proc/kmsg", "/sys/kernel/uevent_seqnum"} {
		require.NoError(t, os.Symlink(target, filepath.Join(lib, fmt.Sprintf("libk%d.so", i))))
	}
	out := t.TempDir()
	script := []string{"sh", "-c", "{ ls /dev/xpu0; } > /result/out.tmp; mv /result/out.tmp /result/out"}
	bundle := runcBundle(t, rootfs, out, script, nil, map[string]string{"cdi.k8s.io/e2e": "baidu.com/xpu=0"})

	kmsg, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(kmsg, "xpu-cdi e2e: TestHookNeverReadsKernelFiles marker %d\n", time.Now().UnixNano())
	require.NoError(t, err)
	require.NoError(t, kmsg.Close())
	before, err := unix.Klogctl(syslogActionSizeUnread, nil)
	require.NoError(t, err, "syslog(SYSLOG_ACTION_SIZE_UNREAD)")
	require.Positive(t, before, "the marker is unread")

	id := fmt.Sprintf("xpu-hook-kmsg-%d", os.Getpid())
	t.Cleanup(func() { _ = exec.Command("runc", "--root", state, "delete", "--force", id).Run() })
	msg, err := runShim(t, wrapper, "--root", state, "create", "--bundle", bundle, id)
	require.NoError(t, err, "the container must be created: %s", msg)
	msg, err = runShim(t, wrapper, "--root", state, "start", id)
	require.NoError(t, err, msg)
	result := filepath.Join(out, "out")
	require.Eventually(t, func() bool { _, err := os.Stat(result); return err == nil }, 30*time.Second, 20*time.Millisecond)
	got, err := os.ReadFile(result)
	require.NoError(t, err)
	require.Equal(t, "/dev/xpu0\n", string(got))

	after, err := unix.Klogctl(syslogActionSizeUnread, nil)
	require.NoError(t, err)
	// Another /proc/kmsg reader on the host would make this flaky; there
	// is none where the tests run (rsyslog's imklog would be one).
	require.GreaterOrEqual(t, after, before, "something read the host's /proc/kmsg while the container was created")
}
