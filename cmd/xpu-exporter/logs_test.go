package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/exporter"
	"github.com/xpu-cdi/xpu-cdi/internal/testutil"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// The scrape carries xpu_exporter_build_info with the linker's version and
// commit and the Go version, as exporter toolkit exporters serve it.
func TestBuildInfo(t *testing.T) {
	root := t.TempDir()
	c := exporter.New(exporter.Config{
		Discover: func() (*discover.Host, error) {
			return discover.Discover(discover.WithDevRoot(root), discover.WithDriverRoot(root))
		},
		DevRoot: root, NoXPUSMI: true,
	})
	h, err := (&options{telemetryPath: "/metrics"}).handler(c)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	code, body := get(t, srv.URL+"/metrics", "", "")
	require.Equal(t, http.StatusOK, code)
	var line string
	for l := range strings.Lines(body) {
		if strings.HasPrefix(l, "xpu_exporter_build_info{") {
			line = strings.TrimSpace(l)
		}
	}
	require.NotEmpty(t, line, "no xpu_exporter_build_info in\n%s", body)
	for _, want := range []string{`version="` + version + `"`, `revision="` + commit + `"`, `goversion="` + runtime.Version() + `"`} {
		require.Contains(t, line, want)
	}
	require.True(t, strings.HasSuffix(line, "} 1"), line)
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// selfSigned writes a key and a self-signed certificate for 127.0.0.1 and
// returns their paths.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "xpu-exporter test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// Every line the exporter writes is in its logger's format: its own, the
// exporter toolkit's ("Listening on", "TLS is enabled.") and the HTTP
// server's (a failed TLS handshake). With a JSON formatter, each line is a
// JSON object.
func TestLogsInOneFormat(t *testing.T) {
	certFile, keyFile := selfSigned(t)
	webConfig := filepath.Join(t.TempDir(), "web.yml")
	require.NoError(t, os.WriteFile(webConfig, fmt.Appendf(nil, "tls_server_config:\n  cert_file: %s\n  key_file: %s\n", certFile, keyFile), 0o600))
	root := t.TempDir()
	addr := freeAddress(t)

	var logs syncBuffer
	log := logrus.New()
	log.SetOutput(&logs)
	log.SetFormatter(&logrus.JSONFormatter{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		app := newApp(log)
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		done <- app.RunContext(ctx, []string{
			"xpu-exporter", "--dev-root", root, "--driver-root", root, "--xpu-smi", "none",
			"--pod-resources-socket", "", "--web.listen-address", addr, "--web.config.file", webConfig,
		})
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	// A client that speaks plain HTTP to the TLS port fails the handshake,
	// which the HTTP server logs.
	testutil.Eventually(t, func(t testing.TB) bool {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer func() { _ = conn.Close() }()
		_, _ = fmt.Fprint(conn, "GET /metrics HTTP/1.1\r\nHost: exporter\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.Copy(io.Discard, conn)
		return strings.Contains(logs.String(), "TLS handshake error")
	}, 10*time.Second, 50*time.Millisecond)

	var msgs []string
	for line := range strings.Lines(logs.String()) {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), "a line not in the logger's format: %q", line)
		msg, _ := entry["msg"].(string)
		msgs = append(msgs, msg)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"xpu-exporter dev: metrics on", "Listening on", "TLS is enabled.", "http: TLS handshake error from"} {
		require.Contains(t, all, want)
	}
}
