package xpusmi

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testenv"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

func fakeHost(t *testing.T, mode fakehost.XPUSMIMode) (*fakehost.Tree, fakehost.XPUSMIState) {
	t.Helper()
	tr := fakehosttest.Build(t, fakehost.P800x8())
	s := fakehost.DefaultTelemetry(tr)
	s.Mode = mode
	s.Devices[2].UsedMiB, s.Devices[2].Utilization, s.Devices[2].Temperature = 2048, 50, 61
	require.NoError(t, fakehost.WriteXPUSMIState(tr.Root, s))
	return tr, s
}

func TestRunnerFakeXPUSMI(t *testing.T) {
	tr, s := fakeHost(t, fakehost.SMINormal)
	r, err := NewRunner(tr.Path(fakehost.XPUSMILink), Config{})
	require.NoError(t, err)
	samples, lineErrs, err := r.Metrics(context.Background())
	require.NoError(t, err)
	require.Empty(t, lineErrs)
	require.Len(t, samples, 8)
	require.Equal(t, Sample{Index: 2, Temperature: 61, Power: 60, MemoryUsed: 2048 << 20, MemoryTotal: 98304 << 20, Utilization: 0.5, Name: "P800 OAM"}, samples[2])
	d, err := r.Detail(context.Background(), 2)
	require.NoError(t, err)
	require.Equal(t, s.Devices[2].BusID, d.BusID)
}

func TestRunnerBounds(t *testing.T) {
	for _, tc := range []struct {
		description string
		mode        fakehost.XPUSMIMode
		want        error
		msg         string
	}{
		{description: "hanging xpu-smi is killed at the timeout", mode: fakehost.SMIHang, want: ErrTimeout},
		{description: "endlessly printing xpu-smi is killed at the output bound", mode: fakehost.SMIFlood, want: ErrOutputTooBig},
		{description: "failing xpu-smi: exit status and its message", mode: fakehost.SMIFail, msg: `exit status 3: "xpu-smi: Failed to initialize XPUML: driver not loaded"`},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tr, _ := fakeHost(t, tc.mode)
			r, err := NewRunner(tr.Path(fakehost.XPUSMIPath), Config{Timeout: 300 * time.Millisecond, MaxOutput: 64 << 10})
			require.NoError(t, err)
			start := time.Now()
			_, _, err = r.Metrics(context.Background())
			require.Less(t, time.Since(start), 3*time.Second)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			} else {
				require.ErrorContains(t, err, tc.msg)
			}
		})
	}
}

func TestNewRunnerRefusesRelativePaths(t *testing.T) {
	for _, p := range []string{"xpu-smi", "./xpu-smi", "/usr/local/bin/../bin/xpu-smi", ""} {
		_, err := NewRunner(p, Config{})
		require.ErrorContains(t, err, "absolute, clean path", p)
	}
}

// The environment is the runner's alone: nothing of the exporter's.
func TestRunnerEnvironment(t *testing.T) {
	t.Setenv("LD_PRELOAD", "/evil.so")
	r, err := NewRunner("/usr/bin/env", Config{})
	require.NoError(t, err)
	out, err := r.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, "PATH=/usr/local/bin:/usr/bin:/bin\nLD_LIBRARY_PATH=/usr/local/xpu/so:/usr/local/xpu/lib64:/usr/local/xpu/lib\nLANG=C\nLC_ALL=C\n", string(out))
}

// In a chroot into the fake host (the exporter's image: the host's / under
// --host-root) the static fake xpu-smi finds its state file at its own /.
func TestRunnerChroot(t *testing.T) {
	testreq.Root(t, "chroot(2) needs CAP_SYS_CHROOT")
	tr, s := fakeHost(t, fakehost.SMINormal)
	r, err := NewRunner(fakehost.XPUSMILink, Config{Chroot: tr.Root})
	require.NoError(t, err)
	require.Contains(t, r.String(), "chroot")
	samples, lineErrs, err := r.Metrics(context.Background())
	require.NoError(t, err)
	require.Empty(t, lineErrs)
	require.Len(t, samples, 8)
	d, err := r.Detail(context.Background(), 7)
	require.NoError(t, err)
	require.Equal(t, s.Devices[7].BusID, d.BusID)
	_, err = os.Stat(tr.Path("/proc/self"))
	require.Error(t, err, "the fake host has no real /proc: the fake found its root without it")
}

// An xpu-smi that is there but whose loader is not (a glibc program outside
// the host's root) fails with an error naming the loader, not execve's "no
// such file or directory"; a missing xpu-smi still says not found. The
// program is a real dynamic executable whose PT_INTERP names a loader that
// does not exist, and a script whose #! interpreter does not.
func TestRunnerNamesMissingLoader(t *testing.T) {
	sh, err := filepath.EvalSymlinks(testreq.Tool(t, "sh"))
	require.NoError(t, err)
	dir := t.TempDir()
	elfProg := filepath.Join(dir, "xpu-smi")
	require.NoError(t, testenv.CopyWithInterpreter(sh, elfProg, "/lib64/ld-gone-x86-64.so.2"))
	script := filepath.Join(dir, "xpu-smi.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/opt/gone/bin/sh\necho\n"), 0o755))
	for _, tc := range []struct {
		description, program, loader string
	}{
		{"ELF interpreter missing", elfProg, "/lib64/ld-gone-x86-64.so.2"},
		{"#! interpreter missing", script, "/opt/gone/bin/sh"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			r, err := NewRunner(tc.program, Config{})
			require.NoError(t, err)
			_, _, err = r.Metrics(context.Background())
			require.ErrorIs(t, err, ErrNoLoader)
			var le *LoaderError
			require.ErrorAs(t, err, &le)
			require.Equal(t, tc.loader, le.Loader)
			require.ErrorContains(t, err, "xpu-smi at "+tc.program+" cannot start: its loader "+tc.loader+" is missing from /")
		})
	}
	r, err := NewRunner(filepath.Join(dir, "absent"), Config{})
	require.NoError(t, err)
	_, _, err = r.Metrics(context.Background())
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NotErrorIs(t, err, ErrNoLoader)
}

// In a chroot, the loader is looked for inside the chroot's root: a real
// dynamic program whose loader is not in that root is named with it.
func TestRunnerNamesMissingLoaderInChroot(t *testing.T) {
	testreq.Root(t, "xpu-smi runs in a chroot")
	sh, err := filepath.EvalSymlinks(testreq.Tool(t, "sh"))
	require.NoError(t, err)
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/local/bin"), 0o755))
	require.NoError(t, testenv.CopyWithInterpreter(sh, filepath.Join(root, "usr/local/bin/xpu-smi"), "/lib64/ld-gone.so.2"))
	r, err := NewRunner("/usr/local/bin/xpu-smi", Config{Chroot: root})
	require.NoError(t, err)
	_, _, err = r.Metrics(context.Background())
	require.ErrorIs(t, err, ErrNoLoader)
	require.ErrorContains(t, err, "its loader /lib64/ld-gone.so.2 is missing from "+root+", the root it runs in")
}
