package sharing

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
	"github.com/xpu-cdi/xpu-cdi/internal/fdio/fdiotest"
)

const res = "baidu.com/xpu"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		description string
		yaml        string
		want        Config
	}{
		{"only a version: no sharing", "version: v1\n", None(res)},
		{"NVIDIA's example, our name", `
version: v1
sharing:
  timeSlicing:
    resources:
    - name: baidu.com/xpu
      replicas: 4
`, Config{Replicas: 4, ResourceName: res}},
		{"rename by default", `
version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: baidu.com/xpu
      replicas: 2
      devices: all
`, Config{Replicas: 2, ResourceName: "baidu.com/xpu.shared", FailRequestsGreaterThanOne: true}},
		{
			"rename of its own wins", `{"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": true, "resources": [{"name": "baidu.com/xpu", "rename": "baidu.com/xpu-ts", "replicas": 3}]}}}`,
			Config{Replicas: 3, ResourceName: "baidu.com/xpu-ts"},
		},
		{"one replica is no sharing: no rename", `
version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: baidu.com/xpu
      replicas: 1
`, None(res)},
	} {
		t.Run(tc.description, func(t *testing.T) {
			got, err := Parse([]byte(tc.yaml), res)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		description string
		yaml        string
		err         string
	}{
		{"empty", "", "the file is empty"},
		{"not yaml", "version: [", "not YAML"},
		{"no version", "sharing: {}\n", `version "": only v1 is known`},
		{"another version", "version: v2\n", `version "v2"`},
		{"unknown top key", "version: v1\nsharng: {}\n", "line 2: unknown key sharng (known here: version, sharing)"},
		{
			"unknown nested key", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: baidu.com/xpu\n      replica: 2\n",
			"line 6: unknown key sharing.timeSlicing.resources[0].replica (known here: name, rename, replicas, devices)",
		},
		{"unknown timeSlicing key", "version: v1\nsharing:\n  timeSlicing:\n    renameByDefualt: true\n", "unknown key sharing.timeSlicing.renameByDefualt"},
		{"mps", "version: v1\nsharing:\n  mps: {}\n", "line 3: sharing.mps is not supported by xpu-device-plugin: Kunlun has no MPS"},
		{"flags", "version: v1\nflags:\n  migStrategy: none\n", "flags is not supported"},
		{
			"zero replicas", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: baidu.com/xpu\n      replicas: 0\n",
			"sharing.timeSlicing.resources[0].replicas: line 6: 0 replicas: give at least 1",
		},
		{"negative replicas", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: -2}\n", "-2 replicas"},
		{"too many replicas", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: 65}\n", "65 replicas: give at most 64"},
		{"replicas not a number", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: \"4\"}\n", `"4" is not a whole number`},
		{"replicas missing", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu}\n", "replicas: missing"},
		{
			"not our resource", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n",
			`sharing.timeSlicing.resources[0].name "nvidia.com/gpu" is not this plugin's resource baidu.com/xpu`,
		},
		{
			"named twice", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: 2}\n    - {name: baidu.com/xpu, replicas: 3}\n",
			"resources[1].name: baidu.com/xpu is named twice",
		},
		{"a device selection", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: 2, devices: [0, 1]}\n", "devices: line 5: a selection of devices is not supported"},
		{"wrong type", "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: yes please\n", "decoding"},
		{"two documents", "version: v1\n---\nversion: v1\n", "more than one YAML document"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), res)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestLoadAndFlags(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: 0}\n"), 0o644))
	_, err := Load(path, res)
	require.ErrorContains(t, err, "sharing configuration "+path+": sharing.timeSlicing.resources[0].replicas")
	_, err = Load(filepath.Join(dir, "missing.yaml"), res)
	require.ErrorContains(t, err, "missing.yaml")
	require.NoError(t, os.WriteFile(path, make([]byte, MaxConfigSize+1), 0o644))
	_, err = Load(path, res)
	require.ErrorIs(t, err, fdio.ErrTooLarge)

	c, err := FromFlags(res, Flags{Replicas: 4, RenameByDefault: true})
	require.NoError(t, err)
	require.Equal(t, Config{Replicas: 4, ResourceName: "baidu.com/xpu.shared"}, c)
	require.Equal(t, StrategyTimeSlicing, c.Strategy())
	c, err = FromFlags(res, Flags{Replicas: 1, RenameByDefault: true})
	require.NoError(t, err)
	require.Equal(t, None(res), c)
	require.Equal(t, StrategyNone, c.Strategy())
	_, err = FromFlags(res, Flags{Replicas: 0})
	require.ErrorContains(t, err, "--replicas: 0 replicas")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: baidu.com/xpu, replicas: 2}\n"))
	f.Add([]byte("version: v1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, res)
		if err != nil {
			return
		}
		if c.Replicas < 1 || c.Replicas > MaxReplicas || c.ResourceName == "" {
			t.Fatalf("accepted a bad configuration: %+v", c)
		}
	})
}

// TestLoadHostileFile: a FIFO as the configuration file, or a link to
// /dev/zero, is an error naming the file at once (before, Load blocked on
// the FIFO until a writer came).
func TestLoadHostileFile(t *testing.T) {
	for _, tc := range fdiotest.HostileFiles() {
		t.Run(tc.Description, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, tc.Plant(path))
			err := fdiotest.Within(t, "Load", func() error {
				_, err := Load(path, res)
				return err
			})
			require.ErrorIs(t, err, fdio.ErrNotRegular)
			require.ErrorContains(t, err, path)
		})
	}
}
