// Package kubelettest is the kubelet's side of the device plugin API for
// tests: a real gRPC Registration service on a kubelet.sock in a temporary
// plugin directory that, like the kubelet's device manager, dials every
// plugin that registers back on its endpoint, asks for its options and
// follows its ListAndWatch stream. Tests then call Allocate and
// GetPreferredAllocation through the same connection the kubelet would use.
//
// It does no scheduling, admission or checkpointing: it stands for the
// kubelet only at the API boundary.
package kubelettest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Kubelet is a running Registration service.
type Kubelet struct {
	pluginapi.UnimplementedRegistrationServer

	// Dir is the device plugin directory; Socket its kubelet.sock.
	Dir    string
	Socket string

	srv  *grpc.Server
	done chan struct{}

	mu      sync.Mutex
	plugins []*Plugin
	regs    chan *Plugin
}

// Start serves the Registration service on dir/kubelet.sock (dir must
// exist; a stale kubelet.sock is replaced).
func Start(dir string) (*Kubelet, error) {
	k := &Kubelet{Dir: dir, Socket: filepath.Join(dir, "kubelet.sock"), regs: make(chan *Plugin, 16)}
	if err := k.listen(); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Kubelet) listen() error {
	if err := os.Remove(k.Socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", k.Socket, err)
	}
	l, err := net.Listen("unix", k.Socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", k.Socket, err)
	}
	k.srv = grpc.NewServer()
	k.done = make(chan struct{})
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func(srv *grpc.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(l)
	}(k.srv, k.done)
	return nil
}

// Stop stops the service, closes the connections to the plugins and
// removes kubelet.sock.
func (k *Kubelet) Stop() {
	k.srv.Stop()
	<-k.done
	_ = os.Remove(k.Socket)
	k.mu.Lock()
	plugins := k.plugins
	k.plugins = nil
	k.mu.Unlock()
	for _, p := range plugins {
		p.Close()
	}
}

// Restart does what a kubelet restart does to the directory: stop, remove
// every socket in it (the kubelet's device manager removes the plugins'
// sockets when it starts), and serve a new kubelet.sock.
func (k *Kubelet) Restart() error {
	k.Stop()
	entries, err := os.ReadDir(k.Dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", k.Dir, err)
	}
	for _, e := range entries {
		if e.Type() == fs.ModeSocket {
			if err := os.Remove(filepath.Join(k.Dir, e.Name())); err != nil {
				return fmt.Errorf("removing %s: %w", e.Name(), err)
			}
		}
	}
	return k.listen()
}

// Register implements the Registration service: it checks the request,
// connects to the plugin and starts following its device list.
func (k *Kubelet) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.GetVersion() != pluginapi.Version {
		return nil, fmt.Errorf("unsupported device plugin API version %q", req.GetVersion())
	}
	if req.GetResourceName() == "" || req.GetEndpoint() == "" || filepath.Base(req.GetEndpoint()) != req.GetEndpoint() {
		return nil, fmt.Errorf("bad registration: resource %q, endpoint %q", req.GetResourceName(), req.GetEndpoint())
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.Dir, req.GetEndpoint()), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to the plugin: %w", err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("GetDevicePluginOptions: %w", err)
	}
	streamCtx, cancel := context.WithCancel(context.Background())
	stream, err := client.ListAndWatch(streamCtx, &pluginapi.Empty{})
	if err != nil {
		cancel()
		_ = conn.Close()
		return nil, fmt.Errorf("ListAndWatch: %w", err)
	}
	p := &Plugin{
		Request: req, Options: opts, Client: client,
		conn: conn, cancel: cancel, updates: make(chan []*pluginapi.Device, 64), ended: make(chan struct{}),
	}
	go p.follow(stream)
	k.mu.Lock()
	k.plugins = append(k.plugins, p)
	k.mu.Unlock()
	k.regs <- p
	return &pluginapi.Empty{}, nil
}

// WaitRegistration returns the next plugin that registers.
func (k *Kubelet) WaitRegistration(ctx context.Context) (*Plugin, error) {
	select {
	case p := <-k.regs:
		return p, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no plugin registered at %s: %w", k.Socket, ctx.Err())
	}
}

// Plugin is a registered plugin as the kubelet sees it.
type Plugin struct {
	Request *pluginapi.RegisterRequest
	Options *pluginapi.DevicePluginOptions
	// Client calls the plugin (Allocate, GetPreferredAllocation).
	Client pluginapi.DevicePluginClient

	conn    *grpc.ClientConn
	cancel  context.CancelFunc
	updates chan []*pluginapi.Device
	ended   chan struct{}
	// err is why the stream ended; read after ended is closed.
	err error
}

func (p *Plugin) follow(stream grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse]) {
	defer close(p.ended)
	for {
		resp, err := stream.Recv()
		if err != nil {
			p.err = err
			return
		}
		p.updates <- resp.GetDevices()
	}
}

// NextDevices returns the next device list the plugin sends.
func (p *Plugin) NextDevices(ctx context.Context) ([]*pluginapi.Device, error) {
	select {
	case devs := <-p.updates:
		return devs, nil
	case <-p.ended:
		select {
		case devs := <-p.updates:
			return devs, nil
		default:
		}
		return nil, fmt.Errorf("ListAndWatch ended: %w", p.err)
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a device list: %w", ctx.Err())
	}
}

// WaitDevices returns the first device list for which ok is true.
func (p *Plugin) WaitDevices(ctx context.Context, ok func([]*pluginapi.Device) bool) ([]*pluginapi.Device, error) {
	var last []*pluginapi.Device
	for {
		devs, err := p.NextDevices(ctx)
		if err != nil {
			return last, err
		}
		if ok(devs) {
			return devs, nil
		}
		last = devs
	}
}

// Ended is closed when the ListAndWatch stream ends.
func (p *Plugin) Ended() <-chan struct{} { return p.ended }

// Close ends the stream and the connection.
func (p *Plugin) Close() {
	p.cancel()
	_ = p.conn.Close()
}
