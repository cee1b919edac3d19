// Command etcd is the tests' etcd: one member on go.etcd.io/etcd/server/v3/embed, listening on loopback
// only, for the private single-node cluster of tests/e2e/harness (cluster.go). etcd's own command cannot
// be built with `go install` (its modules carry replace directives); this small program can, and
// hack/install-deps.sh builds it into the tools directory.
//
// The flags it takes have the names and meanings of etcd's own, so the harness works with a real etcd
// too. Every URL must be plain http on a loopback address: the cluster is private to one machine.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	name := fs.String("name", "default", "member name")
	dataDir := fs.String("data-dir", "", "data directory (required)")
	clientURLs := fs.String("listen-client-urls", "http://127.0.0.1:2379", "loopback URLs to serve clients on (comma-separated)")
	peerURLs := fs.String("listen-peer-urls", "http://127.0.0.1:2380", "loopback URL for the (unused) peer port")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	noFsync := fs.Bool("unsafe-no-fsync", false, "do not fsync (test data only: a crash loses it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *dataDir == "" {
		return errors.New("--data-dir is required")
	}
	clients, err := loopbackURLs("--listen-client-urls", *clientURLs)
	if err != nil {
		return err
	}
	peers, err := loopbackURLs("--listen-peer-urls", *peerURLs)
	if err != nil {
		return err
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = clients, clients
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = peers, peers
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = *logLevel
	cfg.UnsafeNoFsync = *noFsync
	cfg.ListenMetricsUrls = nil

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting etcd in %s: %w", *dataDir, err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Server.Stop()
		return errors.New("etcd was not ready within a minute")
	}
	fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", *clientURLs)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %v, stopping\n", s)
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd server: %w", err)
	}
}

// loopbackURLs parses a comma-separated list of http URLs and refuses any whose host is not a loopback IP.
func loopbackURLs(flagName, list string) ([]url.URL, error) {
	var out []url.URL
	for _, s := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flagName, err)
		}
		if u.Scheme != "http" {
			return nil, fmt.Errorf("%s: %q is not an http:// URL", flagName, s)
		}
		ip := net.ParseIP(u.Hostname())
		if ip == nil || !ip.IsLoopback() || u.Port() == "" {
			return nil, fmt.Errorf("%s: %q is not a loopback IP address with a port", flagName, s)
		}
		out = append(out, *u)
	}
	return out, nil
}
