package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
	"github.com/xpu-cdi/xpu-cdi/internal/xpunode"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// Errors a claim can fail with (wrapped with what names the claim and the
// device); the kubelet shows them in the pod's events.
var (
	ErrUnknownConfig     = errors.New("opaque configuration for this driver is not supported")
	ErrNotOnNode         = errors.New("the device is not on this node")
	ErrDeviceUnhealthy   = errors.New("the device cannot run work")
	ErrNoSpec            = errors.New("no CDI spec names the device")
	ErrDeviceInUse       = errors.New("the device is prepared for another claim")
	ErrClaimNotAllocated = errors.New("the claim is not allocated")
	// ErrDeviceChanged: the name stands for another function, or another
	// share of a card, than the slice offered when the claim was
	// allocated (a partition layout applied meanwhile renumbers the VFs'
	// /dev/xpuN, and so the xpu-N; identity.go).
	ErrDeviceChanged = errors.New("the device is not the one the claim was allocated")
)

// PrepareResourceClaims implements kubeletplugin.DRAPlugin. It reads the
// host and the specs once for the whole call, then prepares each claim on
// its own: a claim that fails changes nothing (its record is not written).
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	defer d.m.since(opPrepare, time.Now())
	sc := d.scanner.Scan()
	devs, h, offered := sc.Devices, sc.Host, sc.Names
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.claims.load(); err != nil {
		for range claims {
			d.m.observeClaim(opPrepare, err)
		}
		return nil, err
	}
	if d.o.Partitions == PartitionsDynamic {
		// A re-layout the driver did not finish (it died half way) is
		// finished or put back before any claim is prepared; a card it
		// cannot finish is refused (prepareDynamicDevice).
		found, err := d.finishLayouts(ctx)
		if err != nil {
			d.o.Log.Errorf("finishing the re-layouts recorded as started: %v", err)
		}
		if found {
			sc = d.scanner.Scan()
			devs, h, offered = sc.Devices, sc.Host, sc.Names
		}
	}
	for _, claim := range claims {
		res, err := d.prepare(ctx, claim, devs, h, offered)
		d.m.observeClaim(opPrepare, err)
		if err != nil {
			err = fmt.Errorf("%s %s/%s: %w", d.o.DriverName, claim.Namespace, claim.Name, err)
			d.o.Log.Errorf("preparing claim: %v", err)
			out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		out[claim.UID] = res
	}
	return out, nil
}

func (d *Driver) prepare(ctx context.Context, claim *resourceapi.ResourceClaim, devs []xpunode.Device, h *discover.Host, offered map[string]bool) (kubeletplugin.PrepareResult, error) {
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{}, ErrClaimNotAllocated
	}
	alloc := &claim.Status.Allocation.Devices
	for _, c := range alloc.Config {
		if c.Opaque != nil && c.Opaque.Driver == d.o.DriverName {
			return kubeletplugin.PrepareResult{}, fmt.Errorf("%w: the %s config of requests %v (this driver takes no parameters; remove it from the claim or its DeviceClass)",
				ErrUnknownConfig, c.Source, c.Requests)
		}
	}
	byName := make(map[string]xpunode.Device, len(devs))
	for _, dev := range devs {
		byName[names.DRADevice(dev.Index)] = dev
	}
	rec := &preparedClaim{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name}
	var result kubeletplugin.PrepareResult
	var dynamic map[string]slotTarget
	if d.o.Partitions == PartitionsDynamic {
		dynamic = dynamicTargets(h)
	}
	for _, r := range alloc.Results {
		if r.Driver != d.o.DriverName {
			continue
		}
		admin := r.AdminAccess != nil && *r.AdminAccess
		var cdi []string
		if t, ok := dynamic[r.Device]; ok && r.Pool == d.o.NodeName {
			name, err := d.prepareDynamicDevice(ctx, claim, r, t, h, offered, rec.Devices)
			if err != nil {
				return kubeletplugin.PrepareResult{}, fmt.Errorf("request %s: device %s: %w", r.Request, r.Device, err)
			}
			cdi = []string{name}
		} else {
			name, err := d.prepareStatic(claim, r, byName, devs, h, offered)
			if err != nil {
				return kubeletplugin.PrepareResult{}, err
			}
			cdi = []string{name}
		}
		rec.Devices = append(rec.Devices, preparedDevice{Request: r.Request, Pool: r.Pool, Device: r.Device, CDIDevices: cdi, AdminAccess: admin})
		result.Devices = append(result.Devices, kubeletplugin.Device{
			Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device, CDIDeviceIDs: cdi,
		})
	}
	if old := d.claims.get(claim.UID); old == nil || !slices.EqualFunc(old.Devices, rec.Devices, sameDevice) {
		if err := d.claims.put(rec); err != nil {
			return kubeletplugin.PrepareResult{}, err
		}
		d.o.Log.Infof("prepared claim %s (%s): %s", rec, rec.UID, describePrepared(rec))
	}
	return result, nil
}

// prepareStatic prepares one allocated device named after its /dev/xpuN
// (static mode, and the cards dynamic mode cannot cut): its CDI device.
func (d *Driver) prepareStatic(claim *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult, byName map[string]xpunode.Device, devs []xpunode.Device, h *discover.Host, offered map[string]bool) (string, error) {
	vendor, class := parser.ParseQualifier(d.o.Kind)
	dev, ok := byName[r.Device]
	if r.Pool != d.o.NodeName || !ok {
		return "", fmt.Errorf("request %s: device %s of pool %s: %w (node %s has: %s); the claim must be allocated again",
			r.Request, r.Device, r.Pool, ErrNotOnNode, d.o.NodeName, deviceNames(devs))
	}
	if err := d.checkIdentity(r.Device, apiDevice(dev), claim.Status.Allocation); err != nil {
		return "", fmt.Errorf("request %s: device %s: %w", r.Request, r.Device, err)
	}
	if !offered[dev.ID] {
		return "", fmt.Errorf("request %s: device %s: %w: no spec of kind %s in %s names %s (create it with: %s)",
			r.Request, r.Device, ErrNoSpec, d.o.Kind, strings.Join(d.scanner.SpecDirs(), ", "), parser.QualifiedName(vendor, class, dev.ID), xpunode.SpecHint(d.o.Kind))
	}
	if taint, ok := d.taintOf(dev, h); ok && !tolerates(r.Tolerations, taint) {
		return "", fmt.Errorf("request %s: device %s: %w: %s (tainted %s=%s:%s, which the allocation does not tolerate)",
			r.Request, r.Device, ErrDeviceUnhealthy, dev.Reason, taint.Key, taint.Value, taint.Effect)
	}
	admin := r.AdminAccess != nil && *r.AdminAccess
	if !admin {
		if other := d.claims.owner(r.Pool, r.Device, claim.UID); other != nil {
			return "", fmt.Errorf("request %s: device %s: %w %s until the kubelet unprepares that claim (a deleted pod's container may still run; the kubelet retries)", r.Request, r.Device, ErrDeviceInUse, other)
		}
	}
	return parser.QualifiedName(vendor, class, dev.ID), nil
}

func sameDevice(a, b preparedDevice) bool {
	return a.Request == b.Request && a.Pool == b.Pool && a.Device == b.Device && a.AdminAccess == b.AdminAccess && slices.Equal(a.CDIDevices, b.CDIDevices)
}

// tolerates reports whether the allocation's tolerations tolerate the
// device's taint as the scheduler matches them (key, operator, value and
// effect; an empty key with Exists matches every key, an empty effect
// every effect): only then is an unhealthy device prepared, because
// someone asked for it.
func tolerates(ts []resourceapi.DeviceToleration, taint resourceapi.DeviceTaint) bool {
	return slices.ContainsFunc(ts, func(t resourceapi.DeviceToleration) bool { return resourceclaim.ToleratesTaint(t, taint) })
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: it forgets
// the claims; one that is not prepared is not an error. In dynamic mode
// the claim's slots are free again and its cards keep their layout, or,
// with IdleWhole, a card no claim holds any more is laid out whole.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	defer d.m.since(opUnprepare, time.Now())
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.claims.load(); err != nil {
		for range claims {
			d.m.observeClaim(opUnprepare, err)
		}
		return nil, err
	}
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		err := d.forget(ctx, c.UID, "unprepared")
		d.m.observeClaim(opUnprepare, err)
		if err != nil {
			err = fmt.Errorf("%s %s: %w", d.o.DriverName, c, err)
			d.o.Log.Errorf("unpreparing claim: %v", err)
		}
		out[c.UID] = err
	}
	return out, nil
}

// forget removes the record of the claim uid, as Unprepare does (a claim
// not recorded is no error): in dynamic mode its slots are free again
// and the idle policy applies to its cards. verb says why, in the log.
// d.mu must be held.
func (d *Driver) forget(ctx context.Context, uid types.UID, verb string) error {
	was := d.claims.get(uid)
	if err := d.claims.remove(uid); err != nil {
		return err
	}
	if was == nil {
		return nil
	}
	d.o.Log.Infof("%s claim %s (%s): %s", verb, was, was.UID, describePrepared(was))
	if d.o.Partitions == PartitionsDynamic {
		d.idleCards(ctx, was.Devices)
	}
	return nil
}

// HandleError implements kubeletplugin.DRAPlugin, as the helper library's
// doc says a driver should: an error it marks recoverable (a failed
// ResourceSlice publish, which the controller retries) is logged and kept
// for the readiness endpoint until a write succeeds again; any other (the
// DRA or the registration gRPC server failed: the kubelet can no longer
// reach the driver) ends Run with it, so that the process exits and is
// restarted.
func (d *Driver) HandleError(_ context.Context, err error, msg string) {
	d.o.Log.Errorf("%s: %v", msg, err)
	if errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.publishFailed(publishError(msg, err))
		return
	}
	select {
	case d.fatal <- fmt.Errorf("%s: %w", msg, err):
	default: // Run ends with the first one already.
	}
}

// Prepared returns the UIDs of the prepared claims, sorted.
func (d *Driver) Prepared() []types.UID {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]types.UID, 0, len(d.claims.claims))
	for u := range d.claims.claims {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

func describePrepared(c *preparedClaim) string {
	parts := make([]string, 0, len(c.Devices))
	for _, d := range c.Devices {
		parts = append(parts, d.Request+"="+d.Device)
	}
	if len(parts) == 0 {
		return "no device of this driver"
	}
	return strings.Join(parts, ", ")
}

func deviceNames(devs []xpunode.Device) string {
	if len(devs) == 0 {
		return "no XPU"
	}
	out := make([]string, len(devs))
	for i, dev := range devs {
		out[i] = names.DRADevice(dev.Index)
	}
	return strings.Join(out, ",")
}
