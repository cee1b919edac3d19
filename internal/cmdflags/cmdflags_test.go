package cmdflags

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
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
