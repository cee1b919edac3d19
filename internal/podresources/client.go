//go:build !no_podresources

package podresources

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// Client asks the kubelet which containers hold which XPUs. Kept by hand:
// the kubelet's own client helper lives in k8s.io/kubernetes, which is not
// meant to be imported, and this one adds the bounds and reconnects we need.
type Client struct {
	socket string
	cfg    Config

	mu   sync.Mutex
	conn *grpc.ClientConn
}

// New returns a client of the kubelet's PodResources socket. It connects
// on first use and reconnects by itself.
func New(socket string, cfg Config) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.ResourcePrefix == "" {
		cfg.ResourcePrefix = names.ResourceName
	}
	if cfg.DRADriver == "" {
		cfg.DRADriver = names.DRADriver
	}
	if cfg.CDIKind == "" {
		cfg.CDIKind = DefaultCDIKind
	}
	return &Client{socket: socket, cfg: cfg}
}

// Socket is the socket the client asks.
func (p *Client) Socket() string { return p.socket }

func (p *Client) client() (podresourcesapi.PodResourcesListerClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		conn, err := grpc.NewClient("unix://"+p.socket,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.cfg.MaxMessage)))
		if err != nil {
			return nil, fmt.Errorf("PodResources socket %s: %w", p.socket, err)
		}
		p.conn = conn
	}
	return podresourcesapi.NewPodResourcesListerClient(p.conn), nil
}

// Close closes the connection.
func (p *Client) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		return nil
	}
	err := p.conn.Close()
	p.conn = nil
	return err
}

// List calls the kubelet's List (bounded in time and size) and returns who
// holds which XPU.
func (p *Client) List(ctx context.Context) (Owners, error) {
	c, err := p.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	resp, err := c.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("PodResources List on %s: %w", p.socket, err)
	}
	return p.Owners(resp), nil
}

// Owners reads the XPUs of every container of resp: device plugin IDs of
// the resource names with the prefix (N, or N::k for a replica of N) and
// DRA devices of the driver (xpu-N). A container holding two replicas of
// one XPU is one owner of it. IDs of another form are not XPUs of ours.
func (p *Client) Owners(resp *podresourcesapi.ListPodResourcesResponse) Owners {
	out := Owners{}
	add := func(idx int, o Owner) {
		if !slices.Contains(out[idx], o) {
			out[idx] = append(out[idx], o)
		}
	}
	for _, pod := range resp.GetPodResources() {
		if p.cfg.Self.Name != "" && pod.GetNamespace() == p.cfg.Self.Namespace && pod.GetName() == p.cfg.Self.Name {
			continue
		}
		for _, c := range pod.GetContainers() {
			base := Owner{Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: c.GetName()}
			for _, d := range c.GetDevices() {
				if !p.ours(d.GetResourceName()) {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					phys, _, _ := strings.Cut(id, names.ReplicaSeparator)
					if idx, ok := discover.ParseIndex(phys); ok {
						add(idx, base)
					}
				}
			}
			for _, dr := range c.GetDynamicResources() {
				for _, cr := range dr.GetClaimResources() {
					if cr.GetDriverName() != p.cfg.DRADriver {
						continue
					}
					o := base
					o.Claim, o.ClaimNamespace = dr.GetClaimName(), dr.GetClaimNamespace()
					for _, idx := range p.claimed(cr) {
						add(idx, o)
					}
				}
			}
		}
	}
	for idx := range out {
		slices.SortFunc(out[idx], func(a, b Owner) int {
			return strings.Compare(a.Namespace+"/"+a.Pod+"/"+a.Container+"/"+a.Claim, b.Namespace+"/"+b.Pod+"/"+b.Container+"/"+b.Claim)
		})
	}
	return out
}

// claimed are the XPUs a claim's device holds: the N of its device name
// xpu-N and of its CDI devices KIND=N, and the node of the function of
// its CDI devices KIND=ADDRESS (Config.Addresses).
func (p *Client) claimed(cr *podresourcesapi.ClaimResource) []int {
	var out []int
	if idx, ok := p.dynamicDevice(cr.GetDeviceName()); ok {
		out = append(out, idx...)
	} else if n, ok := strings.CutPrefix(cr.GetDeviceName(), names.DRADevicePrefix); ok {
		if idx, ok := discover.ParseIndex(n); ok {
			out = append(out, idx)
		}
	}
	for _, d := range cr.GetCdiDevices() {
		if n, ok := strings.CutPrefix(d.GetName(), p.cfg.CDIKind+"="); ok {
			idx, ok := discover.ParseIndex(n)
			if !ok {
				idx, ok = p.cfg.Addresses[strings.ToLower(n)]
			}
			if ok && !slices.Contains(out, idx) {
				out = append(out, idx)
			}
		}
	}
	return out
}

// dynamicDevice returns the nodes a device name of the dynamic partition
// mode holds (Config.DynamicCards): a slot, the VF at its place when the
// card has its count; the whole card, or a slot of a count the card no
// longer has (the claim's VF is gone), the card's PF (its VFs when it
// has no PF node): the card is held either way. false when the name
// is not one of a card that mode cuts.
func (p *Client) dynamicDevice(name string) ([]int, bool) {
	if p.cfg.DynamicCards == nil {
		return nil, false
	}
	card, count, slot, ok := names.ParseDRAPartitionDevice(name)
	if !ok {
		return nil, false
	}
	c, ok := p.cfg.DynamicCards[card]
	if !ok {
		return nil, false
	}
	switch {
	case count > 0 && len(c.VFs) == count:
		return []int{c.VFs[slot]}, true
	case c.PF < 0:
		// No PF node to stand for the card: its VFs do.
		return slices.Clone(c.VFs), true
	}
	return []int{c.PF}, true
}

// ours reports whether a device plugin resource name is the prefix, or the
// prefix followed by a dot (baidu.com/xpu.shared) or a dash (the partition
// resources, baidu.com/xpu-24gb), or one of the sharing configuration's
// renames.
func (p *Client) ours(name string) bool {
	rest, ok := strings.CutPrefix(name, p.cfg.ResourcePrefix)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '-') || slices.Contains(p.cfg.Renames, name)
}
