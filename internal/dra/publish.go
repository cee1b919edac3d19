package dra

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/util/watchlist"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// The helper library publishes the slices in the background and reports a
// failed write through HandleError, but says nothing when a retry
// succeeds. ObservedClient gives the driver that signal: the last write
// of a ResourceSlice decides whether publishing works, and PublishError
// (which the readiness endpoint shows) says why it does not.

// ObservedClient returns client with its ResourceSlice writes (create,
// update, delete) reported to the driver; give it to the helper library
// (kubeletplugin.KubeClient).
func (d *Driver) ObservedClient(client kubernetes.Interface) kubernetes.Interface {
	return observedClient{Interface: client, d: d}
}

// PublishError is why the API server did not take the last ResourceSlice
// write, nil when it did (or none failed yet).
func (d *Driver) PublishError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.publishErr
}

func (d *Driver) publishFailed(err error) {
	d.mu.Lock()
	d.publishErr = err
	d.mu.Unlock()
}

func (d *Driver) sliceWritten(op string, err error) {
	d.m.observeSliceWrite(op, err)
	if err != nil {
		// HandleError gets it with the controller's context.
		return
	}
	d.mu.Lock()
	was := d.publishErr
	d.publishErr = nil
	d.mu.Unlock()
	if was != nil {
		d.o.Log.Infof("the API server took the ResourceSlice of node %s again", d.o.NodeName)
	}
}

type observedClient struct {
	kubernetes.Interface
	d *Driver
}

// IsWatchListSemanticsUnSupported passes on what the wrapped client tells
// the informers (the fake clientset of the tests does not do watch-list):
// wrapping must not change how the helper's informers list.
func (c observedClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

func (c observedClient) ResourceV1() resourcev1.ResourceV1Interface {
	return observedResourceV1{ResourceV1Interface: c.Interface.ResourceV1(), d: c.d}
}

type observedResourceV1 struct {
	resourcev1.ResourceV1Interface
	d *Driver
}

func (c observedResourceV1) ResourceSlices() resourcev1.ResourceSliceInterface {
	return observedSlices{ResourceSliceInterface: c.ResourceV1Interface.ResourceSlices(), d: c.d}
}

type observedSlices struct {
	resourcev1.ResourceSliceInterface
	d *Driver
}

func (s observedSlices) Create(ctx context.Context, slice *resourceapi.ResourceSlice, opts metav1.CreateOptions) (*resourceapi.ResourceSlice, error) {
	out, err := s.ResourceSliceInterface.Create(ctx, slice, opts)
	s.d.sliceWritten("create", err)
	return out, err
}

func (s observedSlices) Update(ctx context.Context, slice *resourceapi.ResourceSlice, opts metav1.UpdateOptions) (*resourceapi.ResourceSlice, error) {
	out, err := s.ResourceSliceInterface.Update(ctx, slice, opts)
	s.d.sliceWritten("update", err)
	return out, err
}

func (s observedSlices) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	err := s.ResourceSliceInterface.Delete(ctx, name, opts)
	s.d.sliceWritten("delete", err)
	return err
}

// publishError is what HandleError records for a failed publish.
func publishError(msg string, err error) error {
	return fmt.Errorf("the API server did not take the ResourceSlice (%s): %w", msg, err)
}

// Ready says why the driver is not ready, nil when it is: the kubelet
// registered it (status is the helper's RegistrationStatus, nil before the
// kubelet answered), it handed its slices to the helper, and the API server
// took the last ResourceSlice write.
func (d *Driver) Ready(status *registerapi.RegistrationStatus) error {
	switch {
	case status == nil:
		return errors.New("not registered with the kubelet yet")
	case !status.PluginRegistered:
		return fmt.Errorf("the kubelet refused the registration: %s", status.Error)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.published {
		return errors.New("the ResourceSlice is not published yet")
	}
	return d.publishErr
}
