package labels

import "github.com/xpu-cdi/xpu-cdi/pkg/logger"

// LogResult says what WriteFile did to path, which holds n labels: a
// change at info level, nothing to do at debug level.
func LogResult(log logger.Interface, path string, res Result, n int) {
	switch res {
	case Written:
		log.Infof("wrote %d node label(s) to %s", n, path)
	case Removed:
		log.Infof("removed %s: the host has no XPU", path)
	case Unchanged:
		log.Debugf("%s holds these labels already", path)
	case Absent:
		log.Debugf("no XPU and no %s: nothing to do", path)
	}
}
