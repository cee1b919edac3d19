package main

import (
	"strings"
	"testing"
)

func TestLoopbackURLs(t *testing.T) {
	for _, tc := range []struct {
		description, list, err string
	}{
		{"IPv4 loopback", "http://127.0.0.1:2379", ""},
		{"two URLs, IPv6 loopback", "http://127.0.0.1:2379, http://[::1]:2379", ""},
		{"any address", "http://0.0.0.0:2379", "not a loopback IP address"},
		{"a host name", "http://localhost:2379", "not a loopback IP address"},
		{"another host", "http://10.0.0.1:2379", "not a loopback IP address"},
		{"no port", "http://127.0.0.1", "with a port"},
		{"TLS", "https://127.0.0.1:2379", "not an http:// URL"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			urls, err := loopbackURLs("--listen-client-urls", tc.list)
			if tc.err == "" {
				if err != nil || len(urls) != strings.Count(tc.list, ",")+1 {
					t.Fatalf("loopbackURLs(%q) = %v, %v", tc.list, urls, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--listen-client-urls") {
				t.Fatalf("loopbackURLs(%q) error %v, want one naming the flag and %q", tc.list, err, tc.err)
			}
		})
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--data-dir", t.TempDir(), "--listen-client-urls", "http://0.0.0.0:2379"},
		{"--data-dir", t.TempDir(), "extra"},
	} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) started etcd", args)
		}
	}
}
