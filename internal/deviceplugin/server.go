package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/privsock"
)

// registerTimeout bounds one Register call (the kubelet dials the plugin
// back before it answers).
const registerTimeout = 10 * time.Second

// Run serves the plugin until ctx ends: it reads the host, then for each
// resource waits for the kubelet's socket, serves the device plugin API on
// the resource's own socket in the plugin directory, registers, and
// registers again whenever the kubelet restarts (its socket is re-created,
// or the resource's socket is removed, which the kubelet does to every
// plugin socket when it starts). The host is read again at the health
// interval; a partition size that appears then is registered as it
// appears. When ctx ends the sockets are removed and Run returns nil. It
// fails when it cannot create a socket, and at start under the single
// partition strategy when the devices are not all of one size.
func (p *Plugin) Run(ctx context.Context) error {
	defer close(p.stopped)
	if _, err := p.refresh(true); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := &runState{ctx: ctx, wg: &sync.WaitGroup{}, errs: make(chan error, 1)}
	p.mu.Lock()
	p.run = run
	for _, k := range slices.Sorted(maps.Keys(p.resources)) {
		p.serve(p.resources[k])
	}
	run.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer run.wg.Done()
		p.healthLoop(ctx)
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-run.errs:
	}
	cancel()
	p.mu.Lock()
	p.run = nil
	p.mu.Unlock()
	run.wg.Wait()
	return err
}

// run is the registration loop of one resource (see Plugin.Run). It fails
// only when it cannot create its socket.
func (r *Resource) run(ctx context.Context) error {
	kubeletSock := filepath.Join(r.o.PluginDir, KubeletSocketName)
	for {
		kubelet, ok := r.waitForKubelet(ctx, kubeletSock)
		if !ok {
			return nil
		}
		srv, err := r.serve()
		if err != nil {
			return err
		}
		if err := r.register(ctx, kubeletSock); err != nil {
			r.setUnready(fmt.Errorf("registering with the kubelet at %s: %w", kubeletSock, err))
			srv.stop()
			if ctx.Err() != nil {
				return nil
			}
			// Logged when the error first appears or changes, not at every retry.
			r.notes.Note(r.o.Log, "register", fmt.Sprintf("registering %s with the kubelet at %s: %v; retrying every %s", r.Name(), kubeletSock, err, r.o.WatchInterval), r.o.Log.Warnf, "")
			if !sleep(ctx, r.o.WatchInterval) {
				return nil
			}
			continue
		}
		r.notes.Note(r.o.Log, "register", "", r.o.Log.Warnf, "")
		r.m.registrations.WithLabelValues(r.Name()).Inc()
		r.setUnready(nil)
		r.o.Log.Infof("registered %s with the kubelet at %s (endpoint %s, strategy %s)", r.Name(), kubeletSock, srv.path, r.o.Strategy)
		why := r.watch(ctx, kubelet, srv)
		r.setUnready(fmt.Errorf("not registered: %s", why))
		srv.stop()
		if ctx.Err() != nil {
			r.o.Log.Infof("stopped; removed %s", srv.path)
			return nil
		}
		r.o.Log.Infof("%s: registering again", why)
	}
}

func (p *Plugin) healthLoop(ctx context.Context) {
	t := time.NewTicker(p.o.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.Refresh()
		}
	}
}

// waitForKubelet returns the kubelet socket's file info once it exists.
func (r *Resource) waitForKubelet(ctx context.Context, path string) (os.FileInfo, bool) {
	logged := false
	for {
		fi, err := os.Stat(path)
		if err == nil && fi.Mode().Type() == fs.ModeSocket {
			return fi, true
		}
		if !logged {
			r.o.Log.Infof("waiting for the kubelet: %s does not exist yet (is the kubelet running, and is --device-plugin-path its device plugin directory?)", path)
			logged = true
		}
		if !sleep(ctx, r.o.WatchInterval) {
			return nil, false
		}
	}
}

// watch returns, with the reason, when the kubelet restarted or ctx ended.
func (r *Resource) watch(ctx context.Context, kubelet os.FileInfo, srv *server) string {
	kubeletSock := filepath.Join(r.o.PluginDir, KubeletSocketName)
	for sleep(ctx, r.o.WatchInterval) {
		if fi, err := os.Stat(srv.path); err != nil || !os.SameFile(fi, srv.info) {
			return fmt.Sprintf("%s was removed (the kubelet restarted)", srv.path)
		}
		if fi, err := os.Stat(kubeletSock); err != nil || !os.SameFile(fi, kubelet) {
			return fmt.Sprintf("%s was removed or re-created (the kubelet stopped or restarted)", kubeletSock)
		}
		select {
		case <-srv.done:
			return "the plugin's gRPC server stopped"
		default:
		}
	}
	return "stopping"
}

// server is one gRPC server on the plugin's socket.
type server struct {
	grpc *grpc.Server
	path string
	info os.FileInfo
	done chan struct{}
}

// serve creates the plugin's socket (replacing a stale one) and serves the
// API on it.
func (r *Resource) serve() (*server, error) {
	path := r.SocketPath()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
	}
	l, err := listenPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("creating the device plugin socket in %s (--device-plugin-path must be the kubelet's device plugin directory, writable by the plugin): %w", r.o.PluginDir, err)
	}
	// The socket is removed by stop, only if it is still this one.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	info, err := os.Stat(path)
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("device plugin socket %s: %w", path, err)
	}
	s := &server{grpc: grpc.NewServer(), path: path, info: info, done: make(chan struct{})}
	pluginapi.RegisterDevicePluginServer(s.grpc, r)
	go func() {
		defer close(s.done)
		if err := s.grpc.Serve(l); err != nil {
			r.o.Log.Errorf("device plugin server on %s: %v", path, err)
		}
	}()
	return s, nil
}

// SocketMode is the mode of the plugin's socket, whatever the umask: only
// root (the kubelet) may connect and ask for devices.
const SocketMode = privsock.Mode

// listenPrivate listens on the unix socket path created with SocketMode.
func listenPrivate(path string) (net.Listener, error) {
	return privsock.Listen(context.Background(), path)
}

// stop ends the streams and removes the socket if it is still the server's.
func (s *server) stop() {
	s.grpc.Stop()
	<-s.done
	if fi, err := os.Stat(s.path); err == nil && os.SameFile(fi, s.info) {
		_ = os.Remove(s.path)
	}
}

// register calls the kubelet's Registration service.
func (r *Resource) register(ctx context.Context, kubeletSock string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     r.socketName(),
		ResourceName: r.Name(),
		Options:      apiOptions(),
	})
	return err
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
