package cmdflags

import (
	"fmt"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
)

// LogLevel is the group of --log-level (default info).
type LogLevel struct {
	Level string
}

// Flag returns --log-level bound to l.
func (l *LogLevel) Flag() cli.Flag {
	return &cli.StringFlag{Name: "log-level", Value: "info", Usage: "panic, fatal, error, warning, info, debug or trace", EnvVars: []string{"XPU_CDI_LOG_LEVEL"}, Destination: &l.Level}
}

// Apply sets the level of log; an unknown level is an error naming the flag.
func (l *LogLevel) Apply(log *logrus.Logger) error {
	lvl, err := logrus.ParseLevel(l.Level)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log.SetLevel(lvl)
	return nil
}
