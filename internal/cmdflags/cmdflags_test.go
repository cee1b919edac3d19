package cmdflags

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
)

// run parses args with flags and returns the Before error.
func run(t *testing.T, flags []cli.Flag, before func() error, args ...string) error {
	t.Helper()
	app := &cli.App{
		Name: "t", Flags: flags, Writer: io.Discard, ErrWriter: io.Discard,
		Before: func(*cli.Context) error { return before() }, Action: func(*cli.Context) error { return nil },
	}
	return app.Run(append([]string{"t"}, args...))
}

func TestKind(t *testing.T) {
	var k Kind
	require.NoError(t, run(t, k.Flags("of the test"), k.Validate))
	require.Equal(t, "baidu.com/xpu", k.String())

	k = Kind{}
	require.NoError(t, run(t, k.Flags("of the test"), k.Validate, "--vendor", "example.com", "--class", "gpu"))
	require.Equal(t, "example.com/gpu", k.String())

	k = Kind{}
	err := run(t, k.Flags("of the test"), k.Validate, "--class", "no/slash")
	require.ErrorContains(t, err, "--vendor/--class")
}

func TestSpecDirs(t *testing.T) {
	var s SpecDirs
	require.NoError(t, run(t, []cli.Flag{s.Flag("spec-dir", "dir")}, func() error { return nil }))
	require.Equal(t, cdiapi.DefaultSpecDirs, s.Dirs())

	s = SpecDirs{}
	t.Setenv("XPU_CDI_SPEC_DIRS", "/a, /b")
	require.NoError(t, run(t, []cli.Flag{s.Flag("spec-dir", "dir")}, func() error { return nil }))
	require.Equal(t, []string{"/a", "/b"}, s.Dirs())

	s = SpecDirs{}
	require.NoError(t, run(t, []cli.Flag{s.Flag("spec-dir", "dir")}, func() error { return nil }, "--spec-dir", "/c"))
	require.Equal(t, []string{"/c"}, s.Dirs(), "the flag wins over the variable")
}

func TestLogLevel(t *testing.T) {
	log := logrus.New()
	var l LogLevel
	require.NoError(t, run(t, []cli.Flag{l.Flag()}, func() error { return l.Apply(log) }, "--log-level", "debug"))
	require.Equal(t, logrus.DebugLevel, log.GetLevel())
	l = LogLevel{}
	require.ErrorContains(t, run(t, []cli.Flag{l.Flag()}, func() error { return l.Apply(log) }, "--log-level", "loud"), "--log-level")
}

func TestExitStatus(t *testing.T) {
	plain := errors.New("plain")
	for _, tc := range []struct {
		description string
		err         error
		want        int
	}{
		{"a plain error", plain, 1},
		{"a status error", &StatusError{Err: plain, Status: 2}, 2},
		{"a wrapped status error", fmt.Errorf("context: %w", &StatusError{Err: plain, Status: 3}), 3},
		{"a status error with a hint inside", &StatusError{Err: &HintError{Err: plain, Hint: "h"}, Status: 2}, 2},
		{"a zero status", &StatusError{Err: plain}, 1},
	} {
		t.Run(tc.description, func(t *testing.T) {
			require.Equal(t, tc.want, ExitStatus(tc.err))
		})
	}
}

// The kubelet-side flags: one default each, the PodResources socket below
// --host-root unless given, and the deprecated names still working with a
// warning that names the new one.
func TestKubelet(t *testing.T) {
	var k Kubelet
	flags := func(k *Kubelet) []cli.Flag {
		return []cli.Flag{
			k.ResourceNameFlag("r"), k.DRADriverNameFlag("d", "driver-name"), k.PodResourcesSocketFlag("s"),
			k.HealthAddressFlag(DRADriverHealthAddress), k.PollIntervalFlag(),
		}
	}
	require.NoError(t, run(t, flags(&k), k.ValidatePollInterval))
	require.Equal(t, Kubelet{
		ResourceName: "baidu.com/xpu", DRADriverName: "xpu.baidu.com", PodResourcesSocket: "/var/lib/kubelet/pod-resources/kubelet.sock",
		HealthAddress: ":9509", PollInterval: 10 * time.Second,
	}, k)

	for _, tc := range []struct {
		description string
		env         map[string]string
		args        []string
		interval    time.Duration
		driver      string
		warnings    []string
	}{
		{"the new names", nil, []string{"--poll-interval", "3s", "--dra-driver-name", "a.example.com"}, 3 * time.Second, "a.example.com", nil},
		{"the new variable", map[string]string{"XPU_CDI_POLL_INTERVAL": "4s"}, nil, 4 * time.Second, "xpu.baidu.com", nil},
		{
			"the old flags", nil,
			[]string{"--health-check-interval", "5s", "--driver-name", "b.example.com"},
			5 * time.Second, "b.example.com",
			[]string{"--health-check-interval is deprecated: use --poll-interval", "--driver-name is deprecated: use --dra-driver-name"},
		},
		{
			"the old variable",
			map[string]string{"XPU_CDI_HEALTH_CHECK_INTERVAL": "6s"},
			nil, 6 * time.Second, "xpu.baidu.com",
			[]string{"XPU_CDI_HEALTH_CHECK_INTERVAL is deprecated: use XPU_CDI_POLL_INTERVAL (--poll-interval)"},
		},
		{
			"the new variable wins over the old",
			map[string]string{"XPU_CDI_POLL_INTERVAL": "7s", "XPU_CDI_HEALTH_CHECK_INTERVAL": "8s"},
			nil,
			7 * time.Second, "xpu.baidu.com", nil,
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var k Kubelet
			require.NoError(t, run(t, flags(&k), func() error { return nil }, tc.args...))
			require.Equal(t, tc.interval, k.PollInterval)
			require.Equal(t, tc.driver, k.DRADriverName)
			log := &logtest.Recorder{}
			k.WarnDeprecated(log)
			var got []string
			if w := log.Warnings(); w != "" {
				got = strings.Split(w, "\n")
			}
			require.ElementsMatch(t, tc.warnings, got)
		})
	}

	k = Kubelet{}
	err := run(t, flags(&k), k.ValidatePollInterval, "--health-check-interval", "1ms")
	require.ErrorContains(t, err, "--poll-interval 1ms is too short")
}

func TestKubeletPodResourcesBelowHostRoot(t *testing.T) {
	for _, tc := range []struct {
		description string
		args        []string
		want        string
	}{
		{"the default, below the host root", nil, "/host/var/lib/kubelet/pod-resources/kubelet.sock"},
		{"a socket given", []string{"--pod-resources-socket", "/s"}, "/s"},
		{"none", []string{"--pod-resources-socket", ""}, ""},
	} {
		t.Run(tc.description, func(t *testing.T) {
			var k Kubelet
			app := &cli.App{
				Name: "t", Flags: []cli.Flag{k.PodResourcesSocketFlag("s")}, Writer: io.Discard, ErrWriter: io.Discard,
				Action: func(c *cli.Context) error { k.ApplyHostRoot(c, "/host"); return nil },
			}
			require.NoError(t, app.Run(append([]string{"t"}, tc.args...)))
			require.Equal(t, tc.want, k.PodResourcesSocket)
		})
	}
}
