package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// TestLogLinesBounded: a message of megabytes (a refused variable or
// annotation quoted whole) is cut at maxLogMessage with a marker; short
// messages are kept.
func TestLogLinesBounded(t *testing.T) {
	var buf bytes.Buffer
	log := logrus.New()
	log.SetOutput(&buf)
	log.SetFormatter(boundedFormatter{&logrus.TextFormatter{DisableColors: true}})
	log.Warnf("ignoring XPU_VISIBLE_DEVICES=%s", strings.Repeat("9", 3<<20))
	log.Info("short")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	require.Less(t, len(lines[0]), maxLogMessage+200)
	require.Contains(t, lines[0], "[truncated: ")
	require.Contains(t, lines[1], "msg=short")
	require.Equal(t, "x", boundMessage("x"))
	require.Len(t, boundMessage(strings.Repeat("a", maxLogMessage)), maxLogMessage)
}
