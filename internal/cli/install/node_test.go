package install

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/nodeinstall"
)

// TestNodeClient reads a Node's label from a TLS API server with the
// service account's token and CA, as the installer does in its pod.
func TestNodeClient(t *testing.T) {
	var gotAuth []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		if r.URL.Query().Get("resourceVersion") != "0" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/api/v1/nodes/node-1":
			_, _ = w.Write([]byte(`{"kind":"Node","metadata":{"name":"node-1","labels":{"baidu.com/xpu.partition-layout":"all-2","x":"y"}}}`))
		case "/api/v1/nodes/bare":
			_, _ = w.Write([]byte(`{"kind":"Node","metadata":{"name":"bare"}}`))
		default:
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","message":"nodes \"other\" is forbidden"}`))
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("tok-1\n"), 0o600))
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)

	c, err := newNodeClient(dir)
	require.NoError(t, err)
	ls, err := c.labels(context.Background(), "node-1")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"baidu.com/xpu.partition-layout": "all-2", "x": "y"}, ls)
	ls, err = c.labels(context.Background(), "bare")
	require.NoError(t, err)
	require.Empty(t, ls)
	// The token is read again at each request (the kubelet rotates it).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("tok-2"), 0o600))
	_, err = c.labels(context.Background(), "other")
	require.ErrorContains(t, err, `getting node other: 403 Forbidden: nodes "other" is forbidden`)
	require.Equal(t, []string{"Bearer tok-1", "Bearer tok-1", "Bearer tok-2"}, gotAuth)

	// No CA, or a CA file without a certificate: refused at once.
	_, err = newNodeClient(t.TempDir())
	require.ErrorContains(t, err, "the service account's CA")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("junk"), 0o600))
	_, err = newNodeClient(dir)
	require.ErrorContains(t, err, "holds no PEM certificate")
}

// The node name goes into the URL path of the GET: one that is not a
// node name (a DNS subdomain), such as "..", which would read
// /api/v1/nodes/.. (the API server's cleaned path, through a redirect),
// is refused before any request.
func TestNodeNameChecked(t *testing.T) {
	for _, name := range []string{"..", ".", "a/b", "../../x", "Node-1", "node_1", "-a", "a-", "a..b", string(make([]byte, 254))} {
		p := partitionOptions{nodeLabel: true, nodeName: name, labelInterval: nodeinstall.DefaultLabelInterval}
		require.ErrorContains(t, p.validate(), "--node-name", "%q", name)
	}
	for _, name := range []string{"node-1", "ip-10-0-0-1.ec2.internal", "a", "0"} {
		p := partitionOptions{nodeLabel: true, nodeName: name, labelInterval: nodeinstall.DefaultLabelInterval}
		require.NoError(t, p.validate(), name)
	}
}

// A redirect from the API server is not followed: Go's client would send
// the token along to another port or to plain HTTP on the same host.
func TestNodeClientNoRedirect(t *testing.T) {
	var leaked []string
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = append(leaked, r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"metadata":{"labels":{"baidu.com/xpu.partition-layout":"all-4"}}}`))
	}))
	defer plain.Close()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("secret-token"), 0o600))
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	c, err := newNodeClient(dir)
	require.NoError(t, err)
	_, err = c.labels(context.Background(), "node-1")
	require.ErrorContains(t, err, "302")
	require.Empty(t, leaked, "the token went to the redirect's target")
}

// The service account's CA and token are read bounded, as regular files:
// a FIFO or an endless file is an error at once.
func TestNodeClientBoundedReads(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "1")
	dir := t.TempDir()
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "ca.crt"), 0o600))
	done := make(chan error, 1)
	go func() { _, err := newNodeClient(dir); done <- err }()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "the service account's CA")
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO as the CA did not return")
	}
	require.NoError(t, os.Remove(filepath.Join(dir, "ca.crt")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), make([]byte, maxCASize+1), 0o600))
	_, err := newNodeClient(dir)
	require.ErrorContains(t, err, "the service account's CA")

	c := &nodeClient{base: "https://127.0.0.1:1", tokenFile: filepath.Join(dir, "token"), http: http.DefaultClient}
	require.NoError(t, os.WriteFile(c.tokenFile, make([]byte, maxTokenSize+1), 0o600))
	_, err = c.labels(context.Background(), "node-1")
	require.ErrorContains(t, err, "the service account's token")
}
