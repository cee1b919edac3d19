package fakehosttest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// P800x8SRIOV is P800x8 with SR-IOV (sriov_totalvfs 4) on every card and
// no VF enabled.
func P800x8SRIOV() fakehost.Host {
	h := fakehost.P800x8()
	for i := range h.Devices {
		h.Devices[i].TotalVFs = 4
	}
	return h
}

// P800SRIOVBoth is P800SRIOV with SR-IOV on its second card too
// (sriov_totalvfs 4, no VF).
func P800SRIOVBoth() fakehost.Host {
	h := fakehost.P800SRIOV()
	h.Devices[len(h.Devices)-1].TotalVFs = 4
	return h
}

// NumVFsPath is the host path of the sriov_numvfs of the PF at addr.
func NumVFsPath(t testing.TB, tr *fakehost.Tree, addr string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(tr.Path("/sys/bus/pci/devices/" + addr))
	require.NoError(t, err)
	return filepath.Join(dir, "sriov_numvfs")
}

// Snapshot records every sriov_numvfs of the tree with its modification
// time, to show that nothing was written.
func Snapshot(t testing.TB, tr *fakehost.Tree) map[string]string {
	t.Helper()
	out := map[string]string{}
	matches, err := filepath.Glob(tr.Path("/sys/bus/pci/devices/*"))
	require.NoError(t, err)
	for _, m := range matches {
		p := filepath.Join(m, "sriov_numvfs")
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		out[p] = string(data) + "@" + strconv.FormatInt(st.ModTime().UnixNano(), 10)
	}
	require.NotEmpty(t, out)
	return out
}

// HoldOpen fakes a process pid (command comm) holding the node at the
// in-tree path node through <root>/proc/PID/fd/FD.
func HoldOpen(t testing.TB, tr *fakehost.Tree, pid, fd int, comm, node string) (release func()) {
	t.Helper()
	dir := tr.Path("/proc/" + strconv.Itoa(pid))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "fd"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644))
	link := filepath.Join(dir, "fd", strconv.Itoa(fd))
	require.NoError(t, os.Symlink(tr.Path(node), link))
	return func() { require.NoError(t, os.RemoveAll(dir)) }
}
