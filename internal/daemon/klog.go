package daemon

import (
	"flag"
	"fmt"
	"strconv"

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
	klog.SetLogger(logr.New(&logrusSink{log: logrus.NewEntry(log)}))
	return nil
}

// logrusSink is a logr.LogSink writing to a logrus entry.
type logrusSink struct {
	log  *logrus.Entry
	name string
}

var _ logr.LogSink = (*logrusSink)(nil)

func (s *logrusSink) Init(logr.RuntimeInfo) {}

func levelOf(v int) logrus.Level {
	switch {
	case v >= klogTrace:
		return logrus.TraceLevel
	case v >= klogDebug:
		return logrus.DebugLevel
	default:
		return logrus.InfoLevel
	}
}

func (s *logrusSink) Enabled(v int) bool { return s.log.Logger.IsLevelEnabled(levelOf(v)) }

func (s *logrusSink) Info(v int, msg string, kv ...any) {
	s.entry(kv).Log(levelOf(v), msg)
}

func (s *logrusSink) Error(err error, msg string, kv ...any) {
	e := s.entry(kv)
	if err != nil {
		e = e.WithError(err)
	}
	e.Error(msg)
}

func (s *logrusSink) entry(kv []any) *logrus.Entry {
	e := s.log
	if s.name != "" {
		e = e.WithField("logger", s.name)
	}
	if f := fields(kv); len(f) > 0 {
		e = e.WithFields(f)
	}
	return e
}

func (s *logrusSink) WithValues(kv ...any) logr.LogSink {
	return &logrusSink{log: s.log.WithFields(fields(kv)), name: s.name}
}

func (s *logrusSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &logrusSink{log: s.log, name: name}
}

// fields turns logr's key/value list into logrus fields; a key without a
// value gets "(MISSING)", as klog's own text output writes it.
func fields(kv []any) logrus.Fields {
	if len(kv) == 0 {
		return nil
	}
	f := make(logrus.Fields, (len(kv)+1)/2)
	for i := 0; i < len(kv); i += 2 {
		key := fmt.Sprint(kv[i])
		if i+1 < len(kv) {
			f[key] = kv[i+1]
		} else {
			f[key] = "(MISSING)"
		}
	}
	return f
}
