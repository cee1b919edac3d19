// Package daemon holds what the two Kubernetes daemons (xpu-device-plugin
// and xpu-dra-driver) share to behave like Kubernetes components: klog,
// which client-go and the DRA helper library log through, routed into the
// daemon's logrus logger and level (klog.go), and the health endpoint the
// kubelet's probes ask (health.go).
//
// It does not decide what "ready" means: each daemon passes its own check.
package daemon
