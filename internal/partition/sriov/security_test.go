package sriov

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
)

// withTimeout runs f and fails the test when it does not return within d
// (the unfixed code would hang the test binary instead).
func withTimeout(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// A FIFO in place of a PF's SR-IOV attribute (a crafted tree, or a fake
// host) is refused at once: opened O_NONBLOCK, the open of a FIFO without
// a writer (reading) or a reader (writing) does not wait.
func TestSysfsAttributeFIFO(t *testing.T) {
	h := fakehost.R200SRIOV()
	h.Devices[0].NoNode = true
	tr := build(t, h)
	dir, err := filepath.EvalSymlinks(tr.Path("/sys/bus/pci/devices/0000:3b:00.0"))
	require.NoError(t, err)
	for _, name := range []string{"sriov_totalvfs", "sriov_numvfs"} {
		require.NoError(t, os.Remove(filepath.Join(dir, name)))
		require.NoError(t, unix.Mkfifo(filepath.Join(dir, name), 0o644))
	}
	// The PF has no node: show reads its sriov_totalvfs itself.
	withTimeout(t, 5*time.Second, "show", func() {
		s, err := partition.Show(context.Background(), config(tr).Config)
		require.NoError(t, err)
		require.Equal(t, 0, s.Cards[1].TotalVFs)
	})
	sys, err := openSysfs(tr.Root)
	require.NoError(t, err)
	defer sys.close()
	withTimeout(t, 5*time.Second, "readNumVFs", func() {
		_, err := sys.readNumVFs("0000:3b:00.0")
		require.ErrorContains(t, err, "not a regular file")
	})
	withTimeout(t, 5*time.Second, "writeNumVFs", func() {
		err := sys.writeNumVFs("0000:3b:00.0", 2)
		require.Error(t, err)
	})
}

// A PF's sriov_numvfs that is a hard link to another file (made by
// whoever can write the tree; a kernel attribute never has a second
// link) is refused: apply does not write the other file.
func TestSysfsAttributeHardLink(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	p3 := fakehosttest.NumVFsPath(t, tr, "0000:83:00.0")
	precious := filepath.Join(filepath.Dir(tr.Root), "precious-"+filepath.Base(tr.Root))
	require.NoError(t, os.WriteFile(precious, []byte("0\n"), 0o644))
	t.Cleanup(func() { _ = os.Remove(precious) })
	require.NoError(t, os.Remove(p3))
	require.NoError(t, os.Link(precious, p3))
	st, err := os.Stat(precious)
	require.NoError(t, err)
	l, _ := partition.ParseLayout("3=2")
	_, err = Apply(context.Background(), config(tr), l)
	require.ErrorContains(t, err, "hard link")
	data, err := os.ReadFile(precious)
	require.NoError(t, err)
	require.Equal(t, "0\n", string(data))
	after, err := os.Stat(precious)
	require.NoError(t, err)
	require.Equal(t, st.ModTime(), after.ModTime(), "not written (and put back)")
}

// A holder's command that carries terminal escapes is escaped in Apply's
// refusal too, as Show escapes it (discover.CleanText).
func TestApplyRefusalEscapesTheCommand(t *testing.T) {
	tr := build(t, fakehosttest.P800SRIOVBoth())
	evil := "\x1b]0;owned\x07\x1b[2J\u202e"
	defer fakehosttest.HoldOpen(t, tr, 4242, 7, evil, "/dev/xpu2")()
	l, _ := partition.ParseLayout("0=4")
	_, err := Apply(context.Background(), config(tr), l)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorContains(t, err, `\x1b]0;owned\a\x1b[2J\u202e`)
	require.False(t, strings.ContainsAny(err.Error(), "\x1b\x07\u202e"), err.Error())
}
