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

	"github.com/stretchr/testify/require"
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
	v, err := c.label(context.Background(), "node-1", "baidu.com/xpu.partition-layout")
	require.NoError(t, err)
	require.Equal(t, "all-2", v)
	v, err = c.label(context.Background(), "bare", "baidu.com/xpu.partition-layout")
	require.NoError(t, err)
	require.Empty(t, v)
	// The token is read again at each request (the kubelet rotates it).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("tok-2"), 0o600))
	_, err = c.label(context.Background(), "other", "baidu.com/xpu.partition-layout")
	require.ErrorContains(t, err, `getting node other: 403 Forbidden: nodes "other" is forbidden`)
	require.Equal(t, []string{"Bearer tok-1", "Bearer tok-1", "Bearer tok-2"}, gotAuth)

	// No CA, or a CA file without a certificate: refused at once.
	_, err = newNodeClient(t.TempDir())
	require.ErrorContains(t, err, "the service account's CA")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("junk"), 0o600))
	_, err = newNodeClient(dir)
	require.ErrorContains(t, err, "holds no PEM certificate")
}
