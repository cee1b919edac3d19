package sriov

import (
	"testing"
	"time"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// config is the Config of a fake tree, with short waits.
func config(tr *fakehost.Tree) Config {
	c := Config{Config: partition.Config{DevRoot: tr.Root, DriverRoot: tr.Root}, Settle: 300 * time.Millisecond}
	if !tr.RealNodes {
		c.DiscoverOptions = []discover.Option{discover.WithNodeStater(tr.NodeStater())}
	}
	return c
}

func build(t testing.TB, h fakehost.Host, opts ...fakehost.Option) *fakehost.Tree {
	t.Helper()
	return fakehosttest.Build(t, h, opts...)
}
