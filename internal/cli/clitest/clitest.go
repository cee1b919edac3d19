// Package clitest runs xpu-cdi subcommands in-process for their package
// tests: each command from its constructor, through a cli.App as main
// builds it, with its own logger, on fake Kunlun hosts. It is for tests
// only and is never part of a shipped binary.
package clitest

import (
	"bytes"
	"io"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
)

// NewCommand is the shape of every subcommand's constructor.
type NewCommand func(log *logrus.Logger) *cli.Command

// Run runs `xpu-cdi args...` with the one command newCmd builds (args[0]
// names it) and returns what it printed on stdout, what it logged, and the
// error main would print. The command is built afresh, so no flag value
// is left over from an earlier run.
func Run(t testing.TB, newCmd NewCommand, args ...string) (stdout, logs string, err error) {
	t.Helper()
	var out, logBuf bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logBuf)
	app := &cli.App{
		Name:            "xpu-cdi",
		Writer:          &out,
		ErrWriter:       io.Discard,
		Commands:        []*cli.Command{newCmd(log)},
		HideHelpCommand: true,
	}
	err = app.Run(append([]string{"xpu-cdi"}, args...))
	return out.String(), logBuf.String(), err
}

// FakeHost builds h with real device nodes (root: mknod; the commands stat
// what they read, as on a real host) and returns its root.
func FakeHost(t *testing.T, h fakehost.Host) string {
	t.Helper()
	return FakeTree(t, h).Root
}

// FakeTree is FakeHost returning the whole tree, for tests that change it.
func FakeTree(t *testing.T, h fakehost.Host) *fakehost.Tree {
	t.Helper()
	testreq.Root(t, "the fake host's device nodes are made with mknod")
	tree := fakehosttest.Build(t, h)
	require.True(t, tree.RealNodes || h.NoNodes)
	return tree
}

// Roots are the --dev-root and --driver-root flags for a fake host's root.
func Roots(root string) []string {
	return []string{"--dev-root", root, "--driver-root", root}
}
