package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file is the sweep of the prepared claims the kubelet will not
// unprepare: claims deleted, or given up, while the driver was down (or
// whose unprepare the kubelet lost). Their records would hold their
// devices against the next claims for ever (ErrDeviceInUse, ErrCardBusy)
// and, in dynamic mode, keep their cards' layouts.
//
// At Run's start and then every SweepInterval the driver reads the
// ResourceClaim of each record from the API server, by namespace and
// name (one GET each: the records are this node's prepared claims, a
// bounded number, and the driver's role may only get claims). A record is
// stale when its claim is gone, was created again under another UID, is
// no longer allocated, has no device of this driver on this node, or is
// reserved for no pod. A stale record is not removed at once: a pod
// deleted with --grace-period 0 leaves the API (and its claim is
// deallocated or deleted) while the kubelet still stops its containers,
// and only then unprepares the claim. A record is swept once it has been
// found stale for SweepGrace: it is then forgotten as Unprepare forgets it
// (its slots free, the idle policy applied to its cards) and counted in
// xpu_dra_driver_swept_claims_total by the reason.

// Defaults of the sweep.
const (
	DefaultSweepInterval = time.Minute
	DefaultSweepGrace    = 2 * time.Minute
)

const (
	// sweepGetTimeout bounds one GET of a claim.
	sweepGetTimeout = 10 * time.Second
	// maxSweepGets bounds the GETs of one sweep; the records after it
	// wait for the next sweep (they are taken in UID order, so a sweep
	// that stops early is not always the same one's loss).
	maxSweepGets = 256
)

// The reasons a record is stale: the values of the metric's reason label.
const (
	staleDeleted     = "deleted"
	staleRecreated   = "recreated"
	staleDeallocated = "deallocated"
	staleNotOnNode   = "not_on_node"
	staleUnreserved  = "unreserved"
)

var staleReasons = []string{staleDeleted, staleRecreated, staleDeallocated, staleNotOnNode, staleUnreserved}

// staleSince is when a record was first found stale, and why.
type staleSince struct {
	at     time.Time
	reason string
}

// staleReason says why the record rec is stale given its claim as the
// API server has it now; "" when it is not.
func (d *Driver) staleReason(rec *preparedClaim, got *resourceapi.ResourceClaim) string {
	switch {
	case got.UID != rec.UID:
		return staleRecreated
	case got.Status.Allocation == nil:
		return staleDeallocated
	case !slices.ContainsFunc(got.Status.Allocation.Devices.Results, func(r resourceapi.DeviceRequestAllocationResult) bool {
		return r.Driver == d.o.DriverName && r.Pool == d.o.NodeName
	}):
		return staleNotOnNode
	case len(got.Status.ReservedFor) == 0:
		return staleUnreserved
	}
	return ""
}

// Sweep reads the ResourceClaim of each recorded claim and forgets the
// records found stale for at least SweepGrace (see above). It returns the
// claims it forgot; an error when the API server could not be asked (the
// records not read yet wait for the next sweep) or a record could not be
// removed. Without a KubeClient it does nothing.
func (d *Driver) Sweep(ctx context.Context) ([]types.NamespacedName, error) {
	if d.o.KubeClient == nil {
		return nil, nil
	}
	d.mu.Lock()
	if err := d.claims.load(); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	recs := make([]preparedClaim, 0, len(d.claims.claims))
	for _, c := range d.claims.claims {
		recs = append(recs, *c)
	}
	d.mu.Unlock()
	slices.SortFunc(recs, func(a, b preparedClaim) int { return strings.Compare(string(a.UID), string(b.UID)) })

	found, askErr := d.askStale(ctx, recs)
	swept, err := d.sweepStale(ctx, recs, found)
	return swept, errors.Join(askErr, err)
}

// askStale reads the ResourceClaim of each record (at most maxSweepGets,
// each bounded by sweepGetTimeout, stopping at the first error) and
// returns, by UID, why the record is stale ("" when it is not); a record
// not asked about is missing.
func (d *Driver) askStale(ctx context.Context, recs []preparedClaim) (map[types.UID]string, error) {
	found := map[types.UID]string{}
	var askErr error
	for i := range recs {
		if i >= maxSweepGets {
			break
		}
		rec := &recs[i]
		gctx, cancel := context.WithTimeout(ctx, sweepGetTimeout)
		got, err := d.o.KubeClient.ResourceV1().ResourceClaims(rec.Namespace).Get(gctx, rec.Name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			found[rec.UID] = staleDeleted
		case err != nil:
			// The API server is not answering: the records after this
			// one wait for the next sweep rather than pile up errors.
			askErr = fmt.Errorf("reading ResourceClaim %s to sweep its record if it is stale: %w", rec, err)
		default:
			found[rec.UID] = d.staleReason(rec, got)
		}
		if askErr != nil {
			break
		}
	}
	return found, askErr
}

// sweepStale forgets, under the driver's lock, the records found stale
// for the same reason for at least SweepGrace and unchanged since they
// were asked about; it returns the claims swept.
func (d *Driver) sweepStale(ctx context.Context, recs []preparedClaim, found map[types.UID]string) ([]types.NamespacedName, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.o.Clock()
	if d.stale == nil {
		d.stale = map[types.UID]staleSince{}
	}
	var swept []types.NamespacedName
	var errs []error
	for _, rec := range recs {
		reason, asked := found[rec.UID]
		if !asked {
			continue
		}
		if reason == "" {
			delete(d.stale, rec.UID)
			continue
		}
		since, ok := d.stale[rec.UID]
		if !ok || since.reason != reason {
			if !ok {
				since.at = now
			}
			since.reason = reason
			d.stale[rec.UID] = since
			d.o.Log.Infof("prepared claim %s (%s) is stale (%s): its record is swept in %s unless the kubelet unprepares it first", rec.String(), rec.UID, describeStale(reason), d.o.SweepGrace)
		}
		if now.Sub(since.at) < d.o.SweepGrace {
			continue
		}
		// Prepared again, or unprepared, while the API server was asked:
		// the record now is not the one found stale.
		if cur := d.claims.get(rec.UID); cur == nil || !slices.EqualFunc(cur.Devices, rec.Devices, sameDevice) {
			delete(d.stale, rec.UID)
			continue
		}
		if err := d.forget(ctx, rec.UID, "swept ("+describeStale(reason)+")"); err != nil {
			errs = append(errs, fmt.Errorf("sweeping the record of claim %s: %w", rec.String(), err))
			continue
		}
		delete(d.stale, rec.UID)
		d.m.swept.WithLabelValues(reason).Inc()
		swept = append(swept, types.NamespacedName{Namespace: rec.Namespace, Name: rec.Name})
	}
	// Records gone meanwhile (unprepared by the kubelet) are not stale.
	for uid := range d.stale {
		if d.claims.get(uid) == nil {
			delete(d.stale, uid)
		}
	}
	return swept, errors.Join(errs...)
}

// describeStale says a stale reason in words, for the log.
func describeStale(reason string) string {
	switch reason {
	case staleDeleted:
		return "its ResourceClaim is deleted"
	case staleRecreated:
		return "its ResourceClaim was created again, with another UID"
	case staleDeallocated:
		return "its ResourceClaim is no longer allocated"
	case staleNotOnNode:
		return "its ResourceClaim is allocated no device of this driver on this node"
	case staleUnreserved:
		return "its ResourceClaim is reserved for no pod"
	}
	return reason
}

// sweep runs Sweep and logs what it could not do.
func (d *Driver) sweep(ctx context.Context) {
	if _, err := d.Sweep(ctx); err != nil && ctx.Err() == nil {
		d.o.Log.Warnf("sweeping the records of claims deleted while the driver was down: %v", err)
	}
}
