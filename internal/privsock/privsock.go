// Package privsock creates the unix sockets of the kubelet plugins (the
// device plugin's socket, the DRA driver's dra.sock and its registration
// socket) with mode 0600 whatever the process's umask: whoever can connect
// to them can ask for devices, and only root (the kubelet) may.
package privsock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Mode is the mode of the sockets.
const Mode = 0o600

// Listen listens on the unix socket path, created with Mode. Linux gives a
// socket's node the mode of the socket's inode less the umask, so setting
// that mode before bind leaves no moment in which others could connect; the
// chmod after bind undoes a umask stricter than Mode.
func Listen(ctx context.Context, path string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var ferr error
		if err := c.Control(func(fd uintptr) { ferr = unix.Fchmod(int(fd), Mode) }); err != nil {
			return err
		}
		return ferr
	}}
	l, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, Mode); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("setting the mode of %s: %w", path, err)
	}
	return l, nil
}

// ListenReplacing is Listen after removing what a previous run left at path
// (a stale socket makes bind fail); the listener removes the socket when it
// is closed. It is what the DRA helper library does with its own sockets,
// and takes the library's listener signature (kubeletplugin.PluginListener,
// kubeletplugin.RegistrarListener).
func ListenReplacing(ctx context.Context, path string) (net.Listener, error) {
	if err := removeSocket(path); err != nil {
		return nil, err
	}
	l, err := Listen(ctx, path)
	if err != nil {
		return nil, err
	}
	return &removingListener{Listener: l, path: path}, nil
}

// removeSocket removes path if it is a socket: anything else there is not
// ours to remove, and bind then fails naming it.
func removeSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking the socket path %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("the socket path %s is a %s, not a socket: remove it", path, fi.Mode().Type())
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the stale socket %s: %w", path, err)
	}
	return nil
}

type removingListener struct {
	net.Listener
	path string
}

func (l *removingListener) Close() error {
	err := l.Listener.Close()
	if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("removing the socket %s: %w", l.path, rerr))
	}
	return err
}
