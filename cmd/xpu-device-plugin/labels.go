package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/xpu-cdi/xpu-cdi/internal/labels"
	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// labelWriter keeps the NFD feature file of --labels-file equal to the
// labels of the last read of the host, sharing labels included.
type labelWriter struct {
	path string
	// resource is the plugin's resource name (before sharing renames
	// it), which names the partition-count labels.
	resource string
	sharing  sharing.Config
	log      *logrus.Logger

	mu      sync.Mutex
	lastErr string
}

// observe is the plugin's host observer. A host that could not be read for
// another reason than having no XPU leaves the file as it is.
func (w *labelWriter) observe(h *discover.Host, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ls []labels.Label
	switch {
	case errors.Is(err, discover.ErrNoDevices):
	case err != nil:
		return
	default:
		ls = labels.For(h, w.resource, &w.sharing)
	}
	res, err := labels.WriteFile(w.path, ls, "xpu-device-plugin")
	if err != nil {
		// Said once per distinct error, not at every health check.
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.log.Warnf("node labels: --labels-file: %v", err)
		}
		return
	}
	w.lastErr = ""
	labels.LogResult(w.log, w.path, res, len(ls))
}

// remove takes the labels off the node (NFD drops them with the file).
func (w *labelWriter) remove() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := os.Remove(w.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing --labels-file %s: %w", w.path, err)
	}
	w.log.Infof("removed the node labels %s", w.path)
	return nil
}
