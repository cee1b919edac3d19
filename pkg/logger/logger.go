// Package logger defines the small logging interface that the packages under
// pkg/ accept. Libraries never configure logging themselves: the commands
// pass a *logrus.Logger (which satisfies Interface) or nothing, in which case
// Discard is used and the library stays silent.
//
// Stability: part of xpu-cdi's public surface, because the options of
// discover and runtimeconfig take an Interface.
package logger

// Interface is the subset of logrus.FieldLogger the libraries use.
type Interface interface {
	Debugf(format string, args ...any)
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
	Errorf(format string, args ...any)
}

// Discard is a logger that drops everything.
var Discard Interface = discard{}

type discard struct{}

func (discard) Debugf(string, ...any) {}
func (discard) Infof(string, ...any)  {}
func (discard) Warnf(string, ...any)  {}
func (discard) Errorf(string, ...any) {}

// OrDiscard returns l, or Discard when l is nil.
func OrDiscard(l Interface) Interface {
	if l == nil {
		return Discard
	}
	return l
}
