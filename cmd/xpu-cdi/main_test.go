package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The subcommands are tested in their packages (internal/cli/*, through
// internal/cli/clitest); these tests cover what main adds: the app, its
// root flags, the wiring of every command and how errors are printed.

// run runs the xpu-cdi app in-process and returns stdout, the log output
// and the error main would print.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	app := newApp(log)
	app.Writer = &stdout
	app.ErrWriter = io.Discard
	err := app.Run(append([]string{"xpu-cdi"}, args...))
	return stdout.String(), logs.String(), err
}

func TestCommands(t *testing.T) {
	var names []string
	for _, c := range newApp(logrus.New()).Commands {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"generate", "refresh", "info", "labels", "install", "uninstall", "list", "partition", "validate", "runtime", "config", "check-container"}, names)
}

// TestErrorsPrintTheirHint checks what main prints: the error on one line
// and, for a host without XPUs, the hint on the next.
func TestErrorsPrintTheirHint(t *testing.T) {
	empty := t.TempDir()
	_, _, err := run(t, "generate", "--dev-root", empty, "--driver-root", empty)
	require.ErrorIs(t, err, discover.ErrNoDevices)
	var out bytes.Buffer
	printError(&out, err)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2, out.String())
	require.True(t, strings.HasPrefix(lines[0], "xpu-cdi: no Kunlun XPU found under "+empty), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "hint: is the kunlun kernel module loaded"), lines[1])

	out.Reset()
	_, _, err = run(t, "generate", "--format", "toml")
	require.Error(t, err)
	printError(&out, err)
	require.Equal(t, "xpu-cdi: --format: unknown spec format \"toml\" (valid: yaml, json)\n", out.String())
}

func TestLogLevel(t *testing.T) {
	_, _, err := run(t, "--log-level", "loud", "list", "--spec-dir", t.TempDir())
	require.ErrorContains(t, err, "--log-level: ")

	dir := t.TempDir()
	_, logs, err := run(t, "--log-level", "error", "list", "--spec-dir", dir)
	require.NoError(t, err)
	require.Empty(t, logs, "the warning of an empty directory is below error")
	t.Setenv("XPU_CDI_LOG_LEVEL", "warning")
	_, logs, err = run(t, "list", "--spec-dir", dir)
	require.NoError(t, err)
	require.Contains(t, logs, "no CDI device found")
}

func TestVersion(t *testing.T) {
	stdout, _, err := run(t, "--version")
	require.NoError(t, err)
	require.Contains(t, stdout, "commit")
}

// TestHelpSaysEachDefaultOnce renders the help of every command: urfave/cli
// appends "(default: ...)" itself, so a usage text that says it too prints
// it twice.
func TestHelpSaysEachDefaultOnce(t *testing.T) {
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			path := append(slices.Clone(prefix), c.Name)
			if len(c.Subcommands) > 0 {
				walk(path, c.Subcommands)
				continue
			}
			t.Run(strings.Join(path, " "), func(t *testing.T) {
				out, _, err := run(t, append(path, "--help")...)
				require.NoError(t, err)
				require.Contains(t, out, "--help")
				for _, line := range strings.Split(out, "\n") {
					require.LessOrEqual(t, strings.Count(line, "(default:"), 1, "line %q", line)
				}
			})
		}
	}
	walk(nil, newApp(logrus.New()).Commands)
}
