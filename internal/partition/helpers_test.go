package partition

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// config is the Config of a fake tree.
func config(tr *fakehost.Tree) Config {
	c := Config{DevRoot: tr.Root, DriverRoot: tr.Root}
	if !tr.RealNodes {
		c.DiscoverOptions = []discover.Option{discover.WithNodeStater(tr.NodeStater())}
	}
	return c
}

func discoverTree(t testing.TB, tr *fakehost.Tree) *discover.Host {
	t.Helper()
	h, err := discover.Discover(tr.DiscoverOptions()...)
	require.NoError(t, err)
	return h
}

func build(t testing.TB, h fakehost.Host, opts ...fakehost.Option) *fakehost.Tree {
	t.Helper()
	return fakehosttest.Build(t, h, opts...)
}
