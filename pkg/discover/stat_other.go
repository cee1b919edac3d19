//go:build !linux

package discover

import (
	"errors"
)

type statNode struct{}

var _ NodeStater = statNode{}

func (statNode) StatNode(string) (NodeInfo, error) {
	return NodeInfo{}, errors.New("device nodes can only be read on Linux")
}
