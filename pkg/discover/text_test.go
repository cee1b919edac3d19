package discover_test

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func TestCleanText(t *testing.T) {
	long := strings.Repeat("a", 1000)
	for _, tc := range []struct {
		description, in, want string
	}{
		{description: "what the driver writes", in: "5.0.21.21", want: "5.0.21.21"},
		{description: "printable UTF-8", in: "Kunlun² é", want: "Kunlun² é"},
		{description: "an escape sequence", in: "K\x1b[2J\x1b]0;owned\x07", want: `K\x1b[2J\x1b]0;owned\a`},
		{description: "a newline and a tab", in: "a\nb\tc\r", want: `a\nb\tc\r`},
		{description: "a C1 control and DEL", in: "a\u009bb\x7f", want: `a\u009bb\x7f`},
		{description: "a bidirectional override", in: "abc\u202edcb", want: `abc\u202edcb`},
		{description: "invalid UTF-8", in: "a\xffb\xc3", want: `a\xffb\xc3`},
		{description: "a backslash", in: `a\x1b`, want: `a\\x1b`},
		{description: "exactly the bound", in: long[:discover.MaxTextLen], want: long[:discover.MaxTextLen]},
		{description: "over the bound", in: long, want: long[:discover.MaxTextLen-3] + "..."},
		{description: "escapes over the bound", in: strings.Repeat("\x1b", 100), want: strings.Repeat(`\x1b`, 63) + "..."},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got := discover.CleanText(tc.in)
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), discover.MaxTextLen)
		})
	}
}

func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"RUNNING", "\x1b[31mERROR", "\xff\xfe", strings.Repeat("é\u202e", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := discover.CleanText(s)
		if len(got) > discover.MaxTextLen || !utf8.ValidString(got) {
			t.Fatalf("CleanText(%q) = %q: over the bound or not UTF-8", s, got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Fatalf("CleanText(%q) = %q keeps a control character", s, got)
			}
		}
		if discover.CleanText(s) != got {
			t.Fatal("not deterministic")
		}
	})
}

// TestHostTextCleaned: on the 4.x and the P800 shapes, a multi-line state
// counts by its first line (ERROR\n... is ERROR, so Unhealthy), a state
// no table knows is Unhealthy, and escape sequences in procfs info fields
// and driver versions reach no consumer raw.
func TestHostTextCleaned(t *testing.T) {
	for _, tc := range []struct {
		description string
		shape       fakehost.Host
		version     string // the driver version file of the shape
	}{
		{description: "4.x", shape: fakehost.R200SRIOV(), version: "/proc/xpu/version"},
		{description: "P800 with procfs", shape: fakehost.P800x8(), version: "/proc/xpu/version"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := build(t, tc.shape)
			write := func(p, content string) {
				require.NoError(t, os.Remove(tree.Path(p)))
				require.NoError(t, os.WriteFile(tree.Path(p), []byte(content), 0o444))
			}
			write("/proc/xpu/dev0/state", "ERROR\nRUNNING\n")
			write("/proc/xpu/dev1/state", "RUNNING\x1b[2K\n")
			write("/proc/xpu/dev2/state", "\nRUNNING\n")
			info, err := os.ReadFile(tree.Path("/proc/xpu/dev3/info"))
			require.NoError(t, err)
			write("/proc/xpu/dev3/info", strings.Replace(string(info), "DeviceSN:", "DeviceSN:\x1b]0;owned\x07", 1))
			write(tc.version, "4.33.0\x1b[2J\n")
			h := discoverWithin(t, tree)
			require.Equal(t, `4.33.0\x1b[2J`, h.DriverVersion)
			require.Equal(t, "ERROR", h.Device(0).State)
			require.Equal(t, `RUNNING\x1b[2K`, h.Device(1).State)
			require.Equal(t, `\nRUNNING`, h.Device(2).State)
			require.True(t, strings.HasPrefix(h.Device(3).Serial, `\x1b]0;owned\a`), h.Device(3).Serial)
			for i, want := range []string{xpunode.Unhealthy, xpunode.Unhealthy, xpunode.Unhealthy, xpunode.Healthy} {
				require.Equal(t, want, xpunode.HealthOf(h.Device(i).State), "xpu%d", i)
			}
		})
	}
	t.Run("5.x sysfs module version", func(t *testing.T) {
		tree := build(t, fakehost.P800XRE5())
		require.NoError(t, os.MkdirAll(tree.Path("/sys/module/kunlun"), 0o755))
		require.NoError(t, os.WriteFile(tree.Path("/sys/module/kunlun/version"), []byte("5.0.21.21\u202e\n"), 0o444))
		h := discoverWithin(t, tree)
		require.Equal(t, `5.0.21.21\u202e`, h.DriverVersion)
	})
}
