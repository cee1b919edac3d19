package daemon

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/bombsimon/logrusr/v4"
	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// klog verbosities at which logrus' debug and trace levels start: V(1) to
// V(4) are the details a Kubernetes component shows at -v=4 (the usual
// debugging level); V(5) and above are per-call traces (the helper
// library's gRPC requests).
const (
	klogDebug = 1
	klogTrace = 5
	klogAll   = 10
)

// RouteKlog sends klog's output (client-go, the DRA helper library) to log,
// in log's format and at its level: klog's V(0) messages are info, V(1) to
// V(4) debug, V(5) and above trace, errors are errors. It sets klog's own
// verbosity from log's level, since klog filters V(n) calls before they
// reach the logger. Call it again after changing log's level.
func RouteKlog(log *logrus.Logger) error {
	v := 0
	switch {
	case log.IsLevelEnabled(logrus.TraceLevel):
		v = klogAll
	case log.IsLevelEnabled(logrus.DebugLevel):
		v = klogTrace - 1
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(v)); err != nil {
		return fmt.Errorf("setting klog's verbosity: %w", err)
	}
	klog.SetLogger(logr.New(logrSink(log)))
	return nil
}

// logrSink is the logr sink writing to log with klog's verbosities mapped
// to logrus levels (klogLevels): klog's and slog's way into log.
func logrSink(log *logrus.Logger) logr.LogSink {
	inner := logrusr.New(log, logrusr.WithFormatter(func(v any) any { return v })).GetSink()
	return klogLevels{inner}
}

// klogLevels narrows klog's verbosities to the three logrusr writes at
// (V(0) info, V(1) debug, V(2) trace; it drops V(3) and above, which logrus
// has no level for): V(1) to V(4) become debug, V(5) and above trace.
type klogLevels struct{ logr.LogSink }

var _ logr.LogSink = klogLevels{}

func levelOf(v int) int {
	switch {
	case v >= klogTrace:
		return 2
	case v >= klogDebug:
		return 1
	default:
		return 0
	}
}

func (s klogLevels) Enabled(v int) bool { return s.LogSink.Enabled(levelOf(v)) }

func (s klogLevels) Info(v int, msg string, kv ...any) { s.LogSink.Info(levelOf(v), msg, kv...) }

func (s klogLevels) WithValues(kv ...any) logr.LogSink {
	return klogLevels{s.LogSink.WithValues(kv...)}
}

func (s klogLevels) WithName(name string) logr.LogSink { return klogLevels{s.LogSink.WithName(name)} }
