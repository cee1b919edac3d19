//go:build !linux

package xpusmi

import (
	"errors"
	"os/exec"
)

func sysProcAttr(*exec.Cmd, string) error {
	return errors.New("running xpu-smi is only supported on Linux")
}
