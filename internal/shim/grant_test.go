package shim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecideGrant(t *testing.T) {
	const kind = "baidu.com/xpu"
	env := func(v string) request { return request{Env: v, HasEnv: true} }
	with := func(r request, f func(*request)) request { f(&r); return r }
	annotated := request{Annotated: []string{kind + "=1"}, Mounted: []string{kind + "=0"}}
	lax := grantPolicy{Kind: kind, AcceptEnvvarWhenUnprivileged: true, ConfigFile: "/etc/c.toml"}
	strict := grantPolicy{Kind: kind, ConfigFile: "/etc/c.toml"}
	failing := grantPolicy{Kind: kind, FailOnRefusedEnvvar: true, ConfigFile: "/etc/c.toml"}
	mounts := grantPolicy{Kind: kind, AcceptDevicePluginMounts: true, ConfigFile: "/etc/c.toml"}

	cases := []struct {
		description string
		req         request
		policy      grantPolicy
		want        []string
		refused     bool
		warning     string // a substring; "" means no warning
		wantErr     error
		errText     string
	}{
		{description: "grants only, annotations before mounts", req: annotated, policy: strict, want: []string{kind + "=1", kind + "=0"}},
		{description: "variable asking for none is no request", req: with(env("none"), func(r *request) { r.privileged = true }), policy: strict},
		{description: "privileged: the variable counts", req: with(env("0,all"), func(r *request) { r.privileged = true }), policy: strict, want: []string{kind + "=0", kind + "=all"}},
		{description: "privileged CRI container: the variable counts", req: with(env("2"), func(r *request) { r.privileged, r.cri = true, true }), policy: strict, want: []string{kind + "=2"}},
		{description: "privileged: grants first, then the variable", req: with(annotated, func(r *request) { r.Env, r.HasEnv, r.privileged = "3", true, true }), policy: strict, want: []string{kind + "=1", kind + "=0", kind + "=3"}},
		{description: "unprivileged, accepted by the configuration", req: env("0"), policy: lax, want: []string{kind + "=0"}},
		{
			description: "unprivileged CRI container: never, whatever the configuration", req: with(env("0"), func(r *request) { r.cri = true }), policy: lax,
			refused: true, warning: "on a Kubernetes node",
		},
		{
			description: "unprivileged with grants: the grants, the variable ignored", req: with(annotated, func(r *request) { r.Env, r.HasEnv = "all", true }), policy: failing,
			want: []string{kind + "=1", kind + "=0"}, warning: "it gets the devices it was granted (cdi.k8s.io annotations baidu.com/xpu=1 and device plugin mounts baidu.com/xpu=0)",
		},
		{
			description: "unprivileged, nothing granted: a warning, no XPU", req: env("all"), policy: strict,
			refused: true, warning: "accept-envvar-when-unprivileged = true in /etc/c.toml",
		},
		{
			description: "unprivileged under fail-on-refused-envvar: an error", req: env("all"), policy: failing,
			wantErr: errUnprivilegedEnv, errText: "set fail-on-refused-envvar = false in /etc/c.toml",
		},
		{
			description: "mounts of a CRI container, not accepted: an error", req: with(annotated, func(r *request) { r.cri = true }), policy: lax,
			wantErr: errPodMounts, errText: "set accept-device-plugin-mounts = true in /etc/c.toml",
		},
		{
			description: "mounts of a CRI container, accepted", req: with(annotated, func(r *request) { r.cri = true }), policy: mounts,
			want: []string{kind + "=1", kind + "=0"},
		},
		{description: "a CRI container with annotations only: no need for the key", req: request{Annotated: []string{kind + "=1"}, cri: true}, policy: strict, want: []string{kind + "=1"}},
		{description: "a malformed value is an error naming it", req: with(env("0,a b"), func(r *request) { r.privileged = true }), policy: strict, errText: `"a b" is not a valid device name`},
		{description: "a device of another kind is an error", req: with(env("other.com/x=0"), func(r *request) { r.privileged = true }), policy: strict, errText: "is not a device of kind baidu.com/xpu"},
	}
	for _, tc := range cases {
		t.Run(tc.description, func(t *testing.T) {
			g, err := decideGrant(tc.req, tc.policy)
			if tc.wantErr != nil || tc.errText != "" {
				require.Error(t, err)
				if tc.wantErr != nil {
					require.ErrorIs(t, err, tc.wantErr)
				}
				require.ErrorContains(t, err, tc.errText)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, g.Names)
			require.Equal(t, tc.refused, g.Refused)
			if tc.warning == "" {
				require.Empty(t, g.Warning)
			} else {
				require.Contains(t, g.Warning, tc.warning)
			}
		})
	}
}
