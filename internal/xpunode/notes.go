package xpunode

import (
	"sync"

	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Notes logs conditions of a daemon's loop (no XPU, no spec, a kubelet
// that refuses the registration) when they appear or change, not at every
// poll. The zero value is ready; safe for concurrent use.
type Notes struct {
	mu   sync.Mutex
	last map[string]string
}

// Note logs msg with logf when it differs from the last message of topic.
// An empty msg clears the topic, and log gets cleared at info level, when
// not empty, if the topic was set.
func (n *Notes) Note(log logger.Interface, topic, msg string, logf func(string, ...any), cleared string) {
	n.mu.Lock()
	if n.last == nil {
		n.last = map[string]string{}
	}
	last := n.last[topic]
	n.last[topic] = msg
	n.mu.Unlock()
	switch {
	case msg == last:
	case msg != "":
		logf("%s", msg)
	case cleared != "" && last != "":
		log.Infof("%s", cleared)
	}
}
