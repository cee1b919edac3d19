package hook

import "github.com/xpu-cdi/xpu-cdi/pkg/logger"

// Options are the settings of the hook's operations; the zero value is
// ready (no extra files, nothing logged).
type Options struct {
	// Log is the logger; nil discards everything.
	Log logger.Interface
	// LibraryFiles makes UpdateLDCache also add these library files (paths
	// inside the container) to the cache, each read alone: for libraries
	// mounted into a directory of many other libraries (a system library
	// directory), which a scan of the whole directory would read at every
	// container creation.
	LibraryFiles []string
}

// options are Options with the logger defaulted.
type options struct {
	log   logger.Interface
	files []string
}

func (o Options) resolve() options {
	return options{log: logger.OrDiscard(o.Log), files: o.LibraryFiles}
}
