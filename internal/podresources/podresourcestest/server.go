// Package podresourcestest serves a kubelet's PodResources List of the
// real API types on a unix socket, for tests.
package podresourcestest

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Server answers List with Resp (which a test may change with Set).
type Server struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	// Block makes List wait for the caller's deadline.
	Block bool

	mu   sync.Mutex
	resp *podresourcesapi.ListPodResourcesResponse
}

// NewServer returns a server answering resp.
func NewServer(resp *podresourcesapi.ListPodResourcesResponse) *Server {
	return &Server{resp: resp}
}

// Set replaces the answer.
func (s *Server) Set(resp *podresourcesapi.ListPodResourcesResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resp = resp
}

// List implements the PodResources List.
func (s *Server) List(ctx context.Context, _ *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	if s.Block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resp == nil {
		return &podresourcesapi.ListPodResourcesResponse{}, nil
	}
	return s.resp, nil
}

// Serve serves srv on a socket in a temporary directory until the test
// ends and returns the socket's path.
func Serve(t testing.TB, srv *Server) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	g := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(g, srv)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return sock
}

// DevicePluginPod is a pod whose one container holds the device plugin
// IDs of resource.
func DevicePluginPod(namespace, name, container, resource string, ids ...string) *podresourcesapi.PodResources {
	return &podresourcesapi.PodResources{Name: name, Namespace: namespace, Containers: []*podresourcesapi.ContainerResources{{
		Name:    container,
		Devices: []*podresourcesapi.ContainerDevices{{ResourceName: resource, DeviceIds: ids}},
	}}}
}

// DRAPod is a pod whose one container holds the DRA devices of driver
// through the claim.
func DRAPod(namespace, name, container, claim, driver string, devices ...string) *podresourcesapi.PodResources {
	var crs []*podresourcesapi.ClaimResource
	for _, d := range devices {
		crs = append(crs, &podresourcesapi.ClaimResource{DriverName: driver, PoolName: "node", DeviceName: d})
	}
	return &podresourcesapi.PodResources{Name: name, Namespace: namespace, Containers: []*podresourcesapi.ContainerResources{{
		Name:             container,
		DynamicResources: []*podresourcesapi.DynamicResource{{ClaimName: claim, ClaimNamespace: namespace, ClaimResources: crs}},
	}}}
}
