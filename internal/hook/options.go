package hook

import "github.com/xpu-cdi/xpu-cdi/pkg/logger"

type options struct {
	log   logger.Interface
	files []string
}

// Option configures the hook's operations.
type Option func(*options)

// WithLogger sets the logger; the default discards everything.
func WithLogger(l logger.Interface) Option { return func(o *options) { o.log = l } }

// WithLibraryFiles makes UpdateLDCache also add these library files (paths
// inside the container) to the cache, each read alone: for libraries
// mounted into a directory of many other libraries (a system library
// directory), which a scan of the whole directory would read at every
// container creation.
func WithLibraryFiles(paths ...string) Option {
	return func(o *options) { o.files = append(o.files, paths...) }
}

func applyOptions(opts []Option) options {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	o.log = logger.OrDiscard(o.log)
	return o
}
