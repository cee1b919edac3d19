package xpusmi

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the program in a process group of its own (so that a
// kill reaches its children), kills it when the exporter dies and, with
// root, chroots it into root.
func sysProcAttr(cmd *exec.Cmd, root string) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Chroot: root}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return nil
}
