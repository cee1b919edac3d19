package deviceplugin

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/xpu-cdi/xpu-cdi/internal/sharing"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
)

// Resource is the device plugin service of one extended resource: the
// whole cards (the plugin's resource name) or one partition size. It has
// its own socket, its own registration with the kubelet and its own
// ListAndWatch stream. Plugin creates them.
type Resource struct {
	pluginapi.UnimplementedDevicePluginServer

	o *Config
	m *metrics
	// key is the resource's name before sharing renames it (baidu.com/xpu,
	// baidu.com/xpu-24gb): how the plugin finds it.
	key string
	// share is its sharing; share.ResourceName is the name advertised.
	share sharing.Config

	mu      sync.Mutex
	devices []Device
	// changed is closed (and replaced) whenever devices change: every
	// ListAndWatch stream waits on it.
	changed chan struct{}
	// stopped is closed when the plugin's Run ends, to end the streams.
	stopped <-chan struct{}
	// notes logs the registration's failures once per change.
	notes xpunode.Notes
	// unready is why the resource is not registered and serving (nil when
	// it is).
	unready error
}

var _ pluginapi.DevicePluginServer = (*Resource)(nil)

// Name is the resource name advertised to the kubelet (with sharing's
// rename: baidu.com/xpu-24gb.shared).
func (r *Resource) Name() string { return r.share.ResourceName }

// Sharing is how the resource's devices are shared.
func (r *Resource) Sharing() sharing.Config { return r.share }

// Devices returns what the resource advertises now.
func (r *Resource) Devices() []Device {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.devices)
}

// socketName is the resource's socket in the plugin directory, derived
// from the advertised name so that two resources do not collide.
func (r *Resource) socketName() string {
	return "xpu-" + strings.ReplaceAll(r.Name(), "/", "_") + ".sock"
}

// SocketPath is the resource's socket.
func (r *Resource) SocketPath() string { return filepath.Join(r.o.PluginDir, r.socketName()) }

// update sets the XPUs of the resource; when what the kubelet would see
// changed it wakes the ListAndWatch streams, logs the new list and
// reports true.
func (r *Resource) update(xpus []Device) bool {
	devs := replicate(xpus, r.share.Replicas)
	r.mu.Lock()
	same := r.devices != nil && sameDevices(r.devices, devs)
	if !same {
		r.devices = devs
		close(r.changed)
		r.changed = make(chan struct{})
	}
	r.mu.Unlock()
	if same {
		return false
	}
	healthy := 0
	for _, d := range xpus {
		if d.Health == pluginapi.Healthy {
			healthy++
		}
	}
	if r.share.Shared() {
		r.o.Log.Infof("advertising %d %s device(s): %d XPU(s) shared %d ways (time-slicing, no memory or fault isolation), %d healthy: %s",
			len(devs), r.Name(), len(xpus), r.share.Replicas, healthy, describe(xpus))
	} else {
		r.o.Log.Infof("advertising %d %s device(s), %d healthy: %s", len(devs), r.Name(), healthy, describe(devs))
	}
	return true
}

// GetDevicePluginOptions implements the device plugin API.
func (r *Resource) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return apiOptions(), nil
}

// ListAndWatch sends the device list, then again at every change, until the
// kubelet closes the stream or the plugin stops.
func (r *Resource) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		r.mu.Lock()
		devs, changed := r.devices, r.changed
		r.mu.Unlock()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: apiDevices(devs)}); err != nil {
			return fmt.Errorf("sending the device list: %w", err)
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		case <-r.stopped:
			return nil
		}
	}
}

// GetPreferredAllocation implements the device plugin API (see preferred),
// among the devices of this resource.
func (r *Resource) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	devs := r.Devices()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		pick := preferred
		if r.share.Shared() {
			pick = preferredReplicas
		}
		ids := pick(devs, cr.GetAvailableDeviceIDs(), cr.GetMustIncludeDeviceIDs(), int(cr.GetAllocationSize()))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate answers with the devices per strategy. An ID that this resource
// does not advertise, or advertises Unhealthy, fails the whole request with
// an error naming it. Replicas of shared XPUs are answered with the XPU's
// CDI name, once per container however many of its replicas the container
// got; with FailRequestsGreaterThanOne a container given more than one
// replica fails the request (the kubelet refuses the pod with
// UnexpectedAdmissionError and this message).
func (r *Resource) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	start := time.Now()
	resp, n, err := r.allocate(req)
	r.m.observeAllocate(r.Name(), start, n, err)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// allocate is Allocate; it also returns how many device IDs it handed out.
func (r *Resource) allocate(req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, int, error) {
	devs := r.Devices()
	byID := make(map[string]Device, len(devs))
	for _, d := range devs {
		byID[d.ID] = d
	}
	name := r.Name()
	resp := &pluginapi.AllocateResponse{}
	n := 0
	for _, cr := range req.GetContainerRequests() {
		ids := cr.GetDevicesIds()
		if r.share.Shared() && r.share.FailRequestsGreaterThanOne && len(ids) > 1 {
			return nil, 0, &allocError{cause: ErrReplicasPerContainer, st: status.Newf(codes.InvalidArgument,
				"a container asks for %d %s: this node shares each XPU %d ways and allows one replica per container (failRequestsGreaterThanOne); ask for 1 (more replicas would give time on the same XPUs, not more of them)",
				len(ids), name, r.share.Replicas)}
		}
		seen := make(map[string]bool, len(ids))
		for _, id := range ids {
			if seen[id] {
				return nil, 0, &allocError{cause: ErrDuplicateDevice, st: status.Newf(codes.InvalidArgument, "%s device %q is requested twice for one container", name, id)}
			}
			seen[id] = true
			d, ok := byID[id]
			if !ok {
				return nil, 0, &allocError{cause: ErrUnknownDevice, st: status.Newf(codes.InvalidArgument, "%s device %q is not a device of this node (advertised: %s)", name, id, knownIDs(devs))}
			}
			if d.Health != pluginapi.Healthy {
				return nil, 0, &allocError{cause: ErrDeviceUnhealthy, st: status.Newf(codes.FailedPrecondition, "%s device %q is %s: %s", name, id, d.Health, d.Reason)}
			}
		}
		xpus := physicalIDs(ids)
		cresp, err := containerResponse(r.o.Strategy, r.o.Kind, xpus)
		if err != nil {
			return nil, 0, &allocError{cause: err, st: status.New(codes.Internal, err.Error())}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cresp)
		n += len(ids)
		if r.share.Shared() {
			r.o.Log.Infof("allocated %s %s: XPU(s) %s (%s)", name, strings.Join(ids, ","), strings.Join(xpus, ","), r.o.Strategy)
		} else {
			r.o.Log.Infof("allocated %s %s (%s)", name, strings.Join(ids, ","), r.o.Strategy)
		}
	}
	return resp, n, nil
}

// PreStartContainer is not used (the options say so); it answers empty.
func (r *Resource) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
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

// Ready says why the resource is not registered with the kubelet and
// serving its socket; nil when it is.
func (r *Resource) Ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unready
}

func (r *Resource) setUnready(err error) {
	r.mu.Lock()
	r.unready = err
	r.mu.Unlock()
}
