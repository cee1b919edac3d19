package daemon

import (
	stdlog "log"
	"log/slog"
	"strings"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
)

// Slog returns a log/slog logger writing to log, in log's format and at its
// level, for libraries that log through slog (the exporter toolkit's web
// server): slog's errors are errors, its debug records debug, the others
// info (logr's mapping of slog levels, through the sink klog uses).
func Slog(log *logrus.Logger) *slog.Logger {
	return slog.New(logr.ToSlogHandler(logr.New(logrSink(log))))
}

// StdLog returns a standard library logger writing each line to log at
// level, for net/http's server errors (a failed TLS handshake, a failed
// accept), which would otherwise go to the standard logger in its own
// format.
func StdLog(log *logrus.Logger, level logrus.Level) *stdlog.Logger {
	return stdlog.New(lineWriter{log: log, level: level}, "", 0)
}

// lineWriter logs what is written to it, one message per write (the
// standard logger writes one line at a time).
type lineWriter struct {
	log   *logrus.Logger
	level logrus.Level
}

func (w lineWriter) Write(p []byte) (int, error) {
	w.log.Log(w.level, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
