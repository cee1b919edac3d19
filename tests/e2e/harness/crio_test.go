package harness

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The CRI-O runc wrapper edits only what this host refuses and leaves a
// valid config.json for runc, whichever place hugepageLimits has.
func TestRestrictedRuncWrapper(t *testing.T) {
	data, err := os.ReadFile("/proc/self/oom_score_adj")
	require.NoError(t, err)
	own, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	for _, tc := range []struct {
		description string
		config      string
		wantOOM     int
	}{
		{
			"indented, limits in the middle, a critical pod's score",
			`{
	"process": {
		"oomScoreAdj": -997,
		"args": ["sleep"]
	},
	"linux": {
		"resources": {
			"hugepageLimits": [
				{
					"pageSize": "2MB",
					"limit": 0
				}
			],
			"memory": {}
		}
	}
}`, own,
		},
		{"compact, limits last, a best-effort score", `{"process":{"oomScoreAdj":1000},"linux":{"resources":{"memory":{},"hugepageLimits":[{"pageSize":"1GB","limit":0}]}}}`, 1000},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			bundle := filepath.Join(dir, "bundle")
			require.NoError(t, os.Mkdir(bundle, 0o755))
			cfg := filepath.Join(bundle, "config.json")
			require.NoError(t, os.WriteFile(cfg, []byte(tc.config), 0o644))
			wrapper := filepath.Join(dir, "runc")
			require.NoError(t, os.WriteFile(wrapper, []byte(restrictedRuncWrapper("/bin/echo")), 0o755))

			out, err := exec.Command(wrapper, "--root", "/x", "create", "--bundle", bundle, "ctr-id").CombinedOutput()
			require.NoError(t, err, string(out))
			require.Equal(t, "--root /x create --bundle "+bundle+" ctr-id\n", string(out), "runc gets the arguments unchanged")

			edited, err := os.ReadFile(cfg)
			require.NoError(t, err)
			var spec struct {
				Process struct {
					OOMScoreAdj int `json:"oomScoreAdj"`
				} `json:"process"`
				Linux struct {
					Resources map[string]json.RawMessage `json:"resources"`
				} `json:"linux"`
			}
			require.NoError(t, json.Unmarshal(edited, &spec), string(edited))
			require.NotContains(t, spec.Linux.Resources, "hugepageLimits")
			require.Contains(t, spec.Linux.Resources, "memory")
			want := tc.wantOOM
			if want < own {
				want = own
			}
			require.Equal(t, want, spec.Process.OOMScoreAdj)
		})
	}
}
