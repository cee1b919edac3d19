package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/cli/clitest"
	shimconfig "github.com/xpu-cdi/xpu-cdi/internal/config"
)

func TestConfigDefault(t *testing.T) {
	out, _, err := clitest.Run(t, NewCommand, "config", "default")
	require.NoError(t, err)
	c, err := shimconfig.Parse([]byte(out))
	require.NoError(t, err)
	require.Equal(t, shimconfig.Default(), c)
	require.Contains(t, out, "# ")

	_, _, err = clitest.Run(t, NewCommand, "config", "default", "extra")
	require.ErrorContains(t, err, `config default takes no arguments, got "extra"`)
}
