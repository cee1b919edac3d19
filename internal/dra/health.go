package dra

import (
	"context"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// WatchHealthStatus implements kubeletplugin.DRAPlugin: it reports every
// device's health to the kubelet (which shows it in the status of the pods
// that use it), again at each change and at each poll so that the report
// does not go stale.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	for {
		d.mu.Lock()
		devs, changed := d.health, d.changed
		d.mu.Unlock()
		report := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, 0, len(devs))}
		now := d.o.Clock()
		for _, dev := range devs {
			h := kubeletplugin.DeviceHealth{
				PoolName: d.o.NodeName, DeviceName: dev.name,
				Health: kubeletplugin.HealthStatusHealthy, LastUpdated: now,
				HealthCheckTimeout: 3 * d.o.PollInterval,
			}
			if dev.reason != "" {
				h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, dev.reason
			}
			report.Devices = append(report.Devices, h)
		}
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(d.o.PollInterval):
		}
	}
}
