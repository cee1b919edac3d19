package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
)

// Plugin is the device plugin service. Create it with New, start it with Run.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	o       *Config
	scanner *xpunode.Scanner

	mu      sync.Mutex
	devices []Device
	// changed is closed (and replaced) whenever devices change: every
	// ListAndWatch stream waits on it.
	changed chan struct{}
	// stopped is closed when Run ends, to end the streams.
	stopped chan struct{}
	// notes logs the registration's failures once per change.
	notes xpunode.Notes
	// unready is why the plugin is not registered and serving (nil when
	// it is): what the readiness endpoint shows.
	unready error
}

var _ pluginapi.DevicePluginServer = (*Plugin)(nil)

// New returns a plugin configured by cfg. It reads nothing yet.
func New(cfg Config) (*Plugin, error) {
	o, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Plugin{
		o: o,
		scanner: xpunode.NewScanner(xpunode.ScannerConfig{
			Discover: o.Discover, Kind: o.Kind, SpecDirs: o.SpecDirs, Log: o.Log,
			// Only the cdi-* strategies answer CDI names an engine resolves.
			NoSpecCheck: !o.Strategy.UsesCDISpec(),
			Empty:       "advertising no " + o.ResourceName,
			Unusable:    "they are Unhealthy",
		}),
		changed: make(chan struct{}),
		stopped: make(chan struct{}),
		unready: errors.New("not registered with the kubelet yet"),
	}
	if o.Strategy == StrategyVolumeMounts {
		o.Log.Warnf("%s", volumeMountsCaveat)
	}
	return p, nil
}

// Devices returns what the plugin advertises now.
func (p *Plugin) Devices() []Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.devices)
}

// SocketPath is the plugin's socket.
func (p *Plugin) SocketPath() string { return filepath.Join(p.o.PluginDir, p.o.socketName()) }

// Refresh reads the host and the CDI specs again and, when what the kubelet
// would see changed, updates the device list and wakes the ListAndWatch
// streams. It reports whether the list changed.
func (p *Plugin) Refresh() bool {
	xpus := p.scan()
	devs := replicate(xpus, p.o.Sharing.Replicas)
	p.mu.Lock()
	same := p.devices != nil && sameDevices(p.devices, devs)
	if !same {
		p.devices = devs
		close(p.changed)
		p.changed = make(chan struct{})
	}
	p.mu.Unlock()
	if !same {
		healthy := 0
		for _, d := range xpus {
			if d.Health == pluginapi.Healthy {
				healthy++
			}
		}
		if p.o.Sharing.Shared() {
			p.o.Log.Infof("advertising %d %s device(s): %d XPU(s) shared %d ways (time-slicing, no memory or fault isolation), %d healthy: %s",
				len(devs), p.o.ResourceName, len(xpus), p.o.Sharing.Replicas, healthy, describe(xpus))
		} else {
			p.o.Log.Infof("advertising %d %s device(s), %d healthy: %s", len(devs), p.o.ResourceName, healthy, describe(devs))
		}
	}
	return !same
}

// scan builds the device list from the host and the specs, after handing
// the host to the observer.
func (p *Plugin) scan() []Device {
	sc := p.scanner.Scan()
	if p.o.HostObserver != nil {
		p.o.HostObserver(sc.Host, sc.Err)
	}
	return sc.Devices
}

// GetDevicePluginOptions implements the device plugin API.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return apiOptions(), nil
}

// ListAndWatch sends the device list, then again at every change, until the
// kubelet closes the stream or the plugin stops.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		p.mu.Lock()
		devs, changed := p.devices, p.changed
		p.mu.Unlock()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: apiDevices(devs)}); err != nil {
			return fmt.Errorf("sending the device list: %w", err)
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		case <-p.stopped:
			return nil
		}
	}
}

// GetPreferredAllocation implements the device plugin API (see preferred).
func (p *Plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	devs := p.Devices()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		pick := preferred
		if p.o.Sharing.Shared() {
			pick = preferredReplicas
		}
		ids := pick(devs, cr.GetAvailableDeviceIDs(), cr.GetMustIncludeDeviceIDs(), int(cr.GetAllocationSize()))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate answers with the devices per strategy. An ID that is not
// advertised, or advertised Unhealthy, fails the whole request with an
// error naming it. Replicas of shared XPUs are answered with the XPU's CDI
// name, once per container however many of its replicas the container got;
// with FailRequestsGreaterThanOne a container given more than one replica
// fails the request (the kubelet refuses the pod with
// UnexpectedAdmissionError and this message).
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	devs := p.Devices()
	byID := make(map[string]Device, len(devs))
	for _, d := range devs {
		byID[d.ID] = d
	}
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		ids := cr.GetDevicesIds()
		if p.o.Sharing.Shared() && p.o.Sharing.FailRequestsGreaterThanOne && len(ids) > 1 {
			return nil, status.Errorf(codes.InvalidArgument,
				"a container asks for %d %s: this node shares each XPU %d ways and allows one replica per container (failRequestsGreaterThanOne); ask for 1 (more replicas would give time on the same XPUs, not more of them)",
				len(ids), p.o.ResourceName, p.o.Sharing.Replicas)
		}
		seen := make(map[string]bool, len(ids))
		for _, id := range ids {
			if seen[id] {
				return nil, status.Errorf(codes.InvalidArgument, "%s device %q is requested twice for one container", p.o.ResourceName, id)
			}
			seen[id] = true
			d, ok := byID[id]
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "%s device %q is not a device of this node (advertised: %s)", p.o.ResourceName, id, knownIDs(devs))
			}
			if d.Health != pluginapi.Healthy {
				return nil, status.Errorf(codes.FailedPrecondition, "%s device %q is %s: %s", p.o.ResourceName, id, d.Health, d.Reason)
			}
		}
		xpus := physicalIDs(ids)
		cresp, err := containerResponse(p.o.Strategy, p.o.Kind, xpus)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cresp)
		if p.o.Sharing.Shared() {
			p.o.Log.Infof("allocated %s %s: XPU(s) %s (%s)", p.o.ResourceName, strings.Join(ids, ","), strings.Join(xpus, ","), p.o.Strategy)
		} else {
			p.o.Log.Infof("allocated %s %s (%s)", p.o.ResourceName, strings.Join(ids, ","), p.o.Strategy)
		}
	}
	return resp, nil
}

// PreStartContainer is not used (the options say so); it answers empty.
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func knownIDs(devs []Device) string {
	if len(devs) == 0 {
		return "none"
	}
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.ID
	}
	return strings.Join(out, ",")
}

// Ready says why the plugin is not registered with the kubelet and serving
// its socket; nil when it is.
func (p *Plugin) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unready
}

func (p *Plugin) setUnready(err error) {
	p.mu.Lock()
	p.unready = err
	p.mu.Unlock()
}
