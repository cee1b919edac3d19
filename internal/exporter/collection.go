package exporter

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the collection's bounds (Config).
const (
	// DefaultCollectionWait is how long a scrape waits for a collection
	// in progress before it is served the last finished one, marked stale.
	DefaultCollectionWait = 5 * time.Second
	// DefaultStuckAfter is how long a collection may run before Healthy
	// fails.
	DefaultStuckAfter = time.Minute
)

// ErrStuck is Healthy's error while a collection has run longer than
// Config.StuckAfter.
var ErrStuck = errors.New("collection stuck")

// reading is the series of one finished collection.
type reading struct {
	metrics []prometheus.Metric
	// at is when the collection started: its readings are no older.
	at time.Time
}

// Collect implements prometheus.Collector. Scrapes share collections: a
// scrape within MinInterval of the last collection's start is served its
// series; otherwise it starts a collection, or joins the one in progress,
// and waits for it at most Wait. A scrape that waited in vain is served the
// last finished collection with xpu_exporter_collection_stale 1; the
// collection goes on in the background, and no other one starts until it
// ends, however many scrapes come. No lock is held across a collection, so
// a child that never ends (xpu-smi in uninterruptible sleep, which no
// signal ends) costs the scrapes their freshness, not their answer.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	r, stale := c.current()
	if r != nil {
		for _, m := range r.metrics {
			ch <- m
		}
	}
	v, age := 0.0, 0.0
	if stale {
		v = 1
	}
	if r != nil {
		age = c.o.now().Sub(r.at).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(metricStale.name, metricStale.help, nil, nil), prometheus.GaugeValue, v)
	if r != nil {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(metricAge.name, metricAge.help, nil, nil), prometheus.GaugeValue, age)
	}
}

// current returns the reading a scrape is served, and whether it is stale
// (older than MinInterval because the collection in progress did not end
// in time; nil when none has ended yet).
func (c *Collector) current() (*reading, bool) {
	c.mu.Lock()
	if c.last != nil && c.o.now().Sub(c.last.at) < c.o.MinInterval {
		r := c.last
		c.mu.Unlock()
		return r, false
	}
	done := c.running
	if done == nil {
		done = make(chan struct{})
		c.running, c.startedAt = done, c.o.now()
		go c.collect(done)
	}
	c.mu.Unlock()

	t := time.NewTimer(c.o.Wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-done:
		return c.last, false
	default:
		return c.last, true
	}
}

// collect reads every source once, on its own goroutine, and publishes the
// reading when it ends. Only one runs at a time (current starts one only
// when none is running), so the collection's own state (the index cache,
// the reports) needs no lock.
func (c *Collector) collect(done chan struct{}) {
	start := c.o.now()
	ms := c.read()
	c.mu.Lock()
	c.last = &reading{metrics: ms, at: start}
	c.running = nil
	c.mu.Unlock()
	close(done)
}

// Healthy fails with ErrStuck while a collection has run longer than
// StuckAfter (a liveness probe restarts the exporter then).
func (c *Collector) Healthy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == nil {
		return nil
	}
	if d := c.o.now().Sub(c.startedAt); d > c.o.StuckAfter {
		return fmt.Errorf("%w: a collection has run for %s (more than %s): xpu-smi or the kubelet does not answer", ErrStuck, d.Round(time.Second), c.o.StuckAfter)
	}
	return nil
}
