package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"
)

func TestDefaultTOMLParsesBackToDefault(t *testing.T) {
	c, err := Parse([]byte(DefaultTOML()))
	require.NoError(t, err)
	require.Equal(t, Default(), c)
	require.NoError(t, Default().Validate())

	// Every field of Config appears as a key in the default file.
	var keys map[string]any
	require.NoError(t, toml.Unmarshal([]byte(DefaultTOML()), &keys))
	data, err := toml.Marshal(Default())
	require.NoError(t, err)
	var all map[string]any
	require.NoError(t, toml.Unmarshal(data, &all))
	for k := range all {
		require.Contains(t, keys, k, "DefaultTOML does not document %q", k)
	}
	require.Len(t, keys, len(all))
}

func TestParse(t *testing.T) {
	tests := []struct {
		description string
		input       string
		want        func(*Config)
		wantErr     []string
	}{
		{description: "empty file is the defaults", input: "", want: func(*Config) {}},
		{
			description: "values override defaults",
			input: `mode = "jit"
low-level-runtimes = ["/usr/local/bin/crun"]
accept-envvar-when-unprivileged = true
dev-root = "/host"
vendor = "example.com"
class = "gpu"
log-level = "debug"
log-file = "/var/log/x.log"
nodes-only = true
no-hooks = true
spec-dirs = ["/etc/cdi"]`,
			want: func(c *Config) {
				c.Mode = ModeJIT
				c.LowLevelRuntimes = []string{"/usr/local/bin/crun"}
				c.AcceptEnvvarWhenUnprivileged = true
				c.DevRoot = "/host"
				c.Vendor, c.Class = "example.com", "gpu"
				c.LogLevel = "debug"
				c.LogFile = "/var/log/x.log"
				c.NodesOnly, c.NoHooks = true, true
				c.SpecDirs = []string{"/etc/cdi"}
			},
		},
		{description: "unknown key named with its line", input: "mode = \"cdi\"\nlow-level-runtime = [\"runc\"]\n", wantErr: []string{`unknown key "low-level-runtime" (line 2)`, "xpu-cdi config default"}},
		{description: "unknown table", input: "[nvidia]\nfoo = 1\n", wantErr: []string{`unknown key "nvidia" (line 1)`}},
		{description: "syntax error has a position", input: "mode = \n", wantErr: []string{"line 1"}},
		{description: "wrong type", input: "accept-envvar-when-unprivileged = \"yes\"\n", wantErr: []string{"line 1"}},
		{description: "bad mode", input: `mode = "fast"`, wantErr: []string{`mode "fast": must be auto, cdi or jit`}},
		{description: "empty runtimes", input: `low-level-runtimes = []`, wantErr: []string{"low-level-runtimes is empty"}},
		{description: "relative runtime path", input: `low-level-runtimes = ["bin/runc"]`, wantErr: []string{`"bin/runc" must be a name looked up on PATH or an absolute path`}},
		{description: "bad vendor", input: `vendor = "-x"`, wantErr: []string{"vendor/class"}},
		{description: "relative spec dir", input: `spec-dirs = ["cdi"]`, wantErr: []string{`spec-dirs: "cdi"`}},
		{description: "relative roots", input: "dev-root = \"host\"\ndriver-root = \"\"\n", wantErr: []string{`dev-root: "host"`, `driver-root: ""`}},
		{description: "bad log level", input: `log-level = "trace"`, wantErr: []string{`log-level "trace"`}},
		{description: "relative log file", input: `log-file = "shim.log"`, wantErr: []string{`log-file: "shim.log"`}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			c, err := Parse([]byte(tc.input))
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, w := range tc.wantErr {
					require.Contains(t, err.Error(), w)
				}
				require.Nil(t, c)
				return
			}
			require.NoError(t, err)
			want := Default()
			tc.want(want)
			require.Equal(t, want, c)
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	require.NoError(t, os.WriteFile(good, []byte("mode = \"cdi\"\ndev-root = \"/a\"\n"), 0o644))
	bad := filepath.Join(dir, "bad.toml")
	require.NoError(t, os.WriteFile(bad, []byte("bogus = 1\n"), 0o644))
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	c, path, err := Load(env(map[string]string{EnvPath: good}))
	require.NoError(t, err)
	require.Equal(t, good, path)
	require.Equal(t, ModeCDI, c.Mode)
	require.Equal(t, "/a", c.DevRoot)

	c, _, err = Load(env(map[string]string{EnvPath: good, EnvDevRoot: "/dev-env", EnvDriverRoot: "/drv-env"}))
	require.NoError(t, err)
	require.Equal(t, "/dev-env", c.DevRoot)
	require.Equal(t, "/drv-env", c.DriverRoot)

	c, path, err = Load(env(map[string]string{EnvPath: filepath.Join(dir, "missing.toml")}))
	require.NoError(t, err, "a missing file is the defaults")
	require.Equal(t, filepath.Join(dir, "missing.toml"), path)
	require.Equal(t, Default(), c)

	// A bad file is an error naming the file, with usable defaults beside it.
	c, _, err = Load(env(map[string]string{EnvPath: bad, EnvDriverRoot: "/drv"}))
	require.ErrorContains(t, err, bad)
	require.ErrorContains(t, err, `"bogus"`)
	require.NotNil(t, c)
	require.Equal(t, Default().LowLevelRuntimes, c.LowLevelRuntimes)
	require.Equal(t, "/drv", c.DriverRoot)

	// A directory cannot be read.
	_, _, err = Load(env(map[string]string{EnvPath: dir}))
	require.ErrorContains(t, err, "reading config "+dir)

	require.Equal(t, DefaultPath, Path(env(nil)))
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(DefaultTOML()))
	f.Add([]byte("mode = \"jit\"\n[x]\ny=1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err == nil {
			require.NoError(t, c.Validate())
		}
	})
}
