package hook

import "github.com/xpu-cdi/xpu-cdi/pkg/logger"

type options struct {
	log logger.Interface
}

// Option configures the hook's operations.
type Option func(*options)

// WithLogger sets the logger; the default discards everything.
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

func applyOptions(opts []Option) options {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	o.log = logger.OrDiscard(o.log)
	return o
}
