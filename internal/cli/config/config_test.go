package config

import (
	"bytes"
	"io"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	shimconfig "github.com/xpu-cdi/xpu-cdi/internal/config"
)

func TestConfigDefault(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	var out bytes.Buffer
	app := &cli.App{Name: "xpu-cdi", Writer: &out, ErrWriter: io.Discard, Commands: []*cli.Command{NewCommand(log)}}
	require.NoError(t, app.Run([]string{"xpu-cdi", "config", "default"}))
	c, err := shimconfig.Parse(out.Bytes())
	require.NoError(t, err)
	require.Equal(t, shimconfig.Default(), c)
	require.Contains(t, out.String(), "# ")

	require.Error(t, app.Run([]string{"xpu-cdi", "config", "default", "extra"}))
}
