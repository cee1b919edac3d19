package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"

	"github.com/xpu-cdi/xpu-cdi/pkg/logger"
)

// Health endpoint paths: liveness (the process serves HTTP), readiness
// (the daemon's own check) and, when the daemon gives a registry, its
// Prometheus metrics.
const (
	LivenessPath  = "/healthz"
	ReadinessPath = "/readyz"
	MetricsPath   = "/metrics"
)

// metricsInFlight bounds the scrapes served at once, metricsTimeout how
// long one may take: a scraper that floods the port gets 503s, it does
// not pile up goroutines.
const (
	metricsInFlight = 4
	metricsTimeout  = 5 * time.Second
)

// MaxHealthConns bounds the connections the endpoint holds at once (the
// kubelet's probes and a scraper or two need a few); more wait in the
// kernel's backlog until one ends, at the latest at its header or idle
// timeout.
const MaxHealthConns = 16

// HealthOption configures ListenHealth and StartHealth.
type HealthOption func(*healthOptions)

type healthOptions struct {
	metrics prometheus.Gatherer
}

// WithMetrics serves GET /metrics from g (the daemon's own registry) in
// the Prometheus text and protobuf formats.
func WithMetrics(g prometheus.Gatherer) HealthOption {
	return func(o *healthOptions) { o.metrics = g }
}

// ReadyFunc says why the daemon is not ready; nil when it is.
type ReadyFunc func() error

// Health is the HTTP health endpoint of a daemon. Bodies are plain text:
// "ok", or on /readyz the reason the daemon is not ready (503). Kept by
// hand on net/http: apiserver's healthz would link the API server library
// for three routes, and this one bounds its connections and scrapes.
type Health struct {
	l       net.Listener
	srv     *http.Server
	metrics bool
}

// ListenHealth listens on addr (host:port; ":9509" on every address). An
// empty addr turns the endpoint off: it returns nil, nil, and a nil
// *Health serves nothing.
func ListenHealth(addr string, ready ReadyFunc, opts ...HealthOption) (*Health, error) {
	if addr == "" {
		return nil, nil
	}
	var o healthOptions
	for _, opt := range opts {
		opt(&o)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health endpoint %s: %w (give a free host:port, or an empty value to turn the endpoint off)", addr, err)
	}
	l = netutil.LimitListener(l, MaxHealthConns)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+LivenessPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET "+ReadinessPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	if o.metrics != nil {
		mux.Handle("GET "+MetricsPath, promhttp.HandlerFor(o.metrics, promhttp.HandlerOpts{
			MaxRequestsInFlight: metricsInFlight,
			Timeout:             metricsTimeout,
		}))
	}
	return &Health{l: l, metrics: o.metrics != nil, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		MaxHeaderBytes:    8 << 10,
	}}, nil
}

// Addr is the address the endpoint listens on.
func (h *Health) Addr() string { return h.l.Addr().String() }

// Serve serves until ctx ends, then shuts the server down; it returns nil
// then, or the error that stopped serving.
func (h *Health) Serve(ctx context.Context) error {
	if h == nil {
		<-ctx.Done()
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- h.srv.Serve(h.l) }()
	select {
	case err := <-done:
		return fmt.Errorf("health endpoint %s: %w", h.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(sctx)
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("health endpoint %s: %w", h.Addr(), err)
	}
	return nil
}

// healthRetry is how often StartHealth tries an address in use again.
const healthRetry = time.Second

// StartHealth listens on addr (nothing when empty) and serves the health
// endpoint until ctx ends; a failure to serve later is logged. An address
// in use is not an error: during a DaemonSet's rolling update with
// maxSurge and hostNetwork, the old pod holds the port until it stops, and
// the kubelet's probes of the new pod reach the old one's endpoint
// meanwhile. StartHealth then says so once and tries again every second in
// the background, until the port is free or ctx ends.
func StartHealth(ctx context.Context, addr string, ready ReadyFunc, log logger.Interface, opts ...HealthOption) error {
	h, err := ListenHealth(addr, ready, opts...)
	if errors.Is(err, syscall.EADDRINUSE) {
		log.Warnf("%v; trying again every %s (the other pod of a rolling update on the host network holds it until it stops)", err, healthRetry)
		go func() {
			t := time.NewTicker(healthRetry)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if h, err := ListenHealth(addr, ready, opts...); err == nil {
					serveHealth(ctx, h, log)
					return
				}
			}
		}()
		return nil
	}
	if err != nil || h == nil {
		return err
	}
	go serveHealth(ctx, h, log)
	return nil
}

func serveHealth(ctx context.Context, h *Health, log logger.Interface) {
	paths := LivenessPath + ", " + ReadinessPath
	if h.metrics {
		paths += ", " + MetricsPath
	}
	log.Infof("health endpoint on %s (%s)", h.Addr(), paths)
	if err := h.Serve(ctx); err != nil {
		log.Errorf("%v", err)
	}
}
