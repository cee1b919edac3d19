package shim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		description string
		args        []string
		want        Args
	}{
		{
			description: "containerd shim create", args: []string{"--root", "/run/containerd/runc/default", "--log", "/run/x/log.json", "--log-format", "json", "create", "--bundle", "/run/b", "--pid-file", "/run/b/init.pid", "abc"},
			want: Args{Command: "create", Bundle: "/run/b", Log: "/run/x/log.json", LogFormat: "json"},
		},
		{
			description: "equals forms", args: []string{"--root=/r", "--log=/l", "--log-format=text", "create", "--bundle=/b", "id"},
			want: Args{Command: "create", Bundle: "/b", Log: "/l", LogFormat: "text"},
		},
		{description: "short bundle", args: []string{"create", "-b", "/b", "id"}, want: Args{Command: "create", Bundle: "/b"}},
		{description: "short bundle with equals", args: []string{"create", "-b=/b", "id"}, want: Args{Command: "create", Bundle: "/b"}},
		{description: "single dash long flags (Go flag syntax)", args: []string{"-root", "/r", "-log", "/l", "create", "-bundle", "/b", "id"}, want: Args{Command: "create", Bundle: "/b", Log: "/l"}},
		{description: "no bundle means cwd", args: []string{"create", "id"}, want: Args{Command: "create"}},
		{description: "run", args: []string{"--debug", "run", "-d", "--bundle", "/b", "id"}, want: Args{Command: "run", Bundle: "/b"}},
		{description: "flags after the ID", args: []string{"create", "id", "--bundle", "/b"}, want: Args{Command: "create", Bundle: "/b"}},
		{description: "values of other flags are not the bundle", args: []string{"create", "--pid-file", "--bundle", "--console-socket", "/s", "id"}, want: Args{Command: "create"}},
		{
			description: "boolean globals", args: []string{"--systemd-cgroup", "--debug", "--rootless", "false", "--criu", "/usr/sbin/criu", "create", "--no-pivot", "--no-new-keyring", "--preserve-fds", "2", "-b", "/b", "id"},
			want: Args{Command: "create", Bundle: "/b"},
		},
		{description: "rootless with equals", args: []string{"--rootless=auto", "run", "--bundle", "/b", "id"}, want: Args{Command: "run", Bundle: "/b"}},
		{description: "crun cgroup manager", args: []string{"--cgroup-manager", "cgroupfs", "create", "--bundle", "/b", "id"}, want: Args{Command: "create", Bundle: "/b"}},
		{description: "start is not create", args: []string{"--root", "/r", "start", "--bundle", "/b", "id"}, want: Args{Command: "start"}},
		{description: "state", args: []string{"state", "id"}, want: Args{Command: "state"}},
		{description: "delete --force", args: []string{"--log", "/l", "delete", "--force", "id"}, want: Args{Command: "delete", Log: "/l"}},
		{description: "exec with a process file", args: []string{"exec", "--process", "/p.json", "id"}, want: Args{Command: "exec"}},
		{description: "version", args: []string{"--version"}, want: Args{}},
		{description: "nothing", args: nil, want: Args{}},
		{description: "double dash ends flags", args: []string{"create", "--", "--bundle"}, want: Args{Command: "create"}},
		{description: "global value flag at the end", args: []string{"--root"}, want: Args{}},
		{description: "bundle flag at the end", args: []string{"create", "id", "--bundle"}, want: Args{Command: "create"}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got := ParseArgs(tc.args)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want.Command == "create" || tc.want.Command == "run", got.ModifiesBundle())
		})
	}
}

func FuzzParseArgs(f *testing.F) {
	f.Add("--root\x00/r\x00create\x00-b\x00/b\x00id")
	f.Add("run\x00--bundle=/x")
	f.Fuzz(func(t *testing.T, s string) {
		a := ParseArgs(splitNUL(s))
		if a.Bundle != "" {
			require.True(t, a.ModifiesBundle())
		}
	})
}

func splitNUL(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
