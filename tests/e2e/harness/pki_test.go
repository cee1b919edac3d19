package harness

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.NotNil(t, block, path)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

// The cluster's certificates chain to its CA for what each is used for, and
// carry the Kubernetes user and groups in the subject.
func TestClusterPKI(t *testing.T) {
	dir := t.TempDir()
	ca, err := newClusterCA(dir)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, ca.CertPath))

	for _, tc := range []struct {
		description string
		req         certRequest
		serving     bool
	}{
		{"a client certificate", certRequest{name: "node", cn: "system:node:n1", orgs: []string{"system:nodes"}}, false},
		{"a serving certificate", certRequest{name: "api", cn: "kube-apiserver", dns: []string{"kubernetes"}, ips: []net.IP{net.IPv4(127, 0, 0, 1)}}, true},
	} {
		t.Run(tc.description, func(t *testing.T) {
			p, err := ca.issue(tc.req)
			require.NoError(t, err)
			_, err = tls.LoadX509KeyPair(p.CertPath, p.KeyPath)
			require.NoError(t, err, "certificate and key match")
			cert := readCert(t, p.CertPath)
			require.Equal(t, tc.req.cn, cert.Subject.CommonName)
			require.Equal(t, tc.req.orgs, cert.Subject.Organization)
			_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			require.NoError(t, err)
			_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "kubernetes", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if tc.serving {
				require.NoError(t, err)
				require.NoError(t, cert.VerifyHostname("127.0.0.1"))
			} else {
				require.Error(t, err, "a client certificate does not serve")
			}
			info, err := os.Stat(p.KeyPath)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
		})
	}

	private, public, err := newServiceAccountKey(dir)
	require.NoError(t, err)
	for _, path := range []string{private, public} {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		block, _ := pem.Decode(data)
		require.NotNil(t, block, path)
	}
}

// A kubeconfig written by the harness is one client-go reads back as it
// was meant: the server, the CA, the user's certificate and key, in the
// current context.
func TestKubeconfig(t *testing.T) {
	data, err := kubeconfig("https://127.0.0.1:6443", "/pki/ca.crt", "admin", certPair{CertPath: "/pki/admin.crt", KeyPath: "/pki/admin.key"})
	require.NoError(t, err)
	cfg, err := clientcmd.Load(data)
	require.NoError(t, err)
	ctx := cfg.Contexts[cfg.CurrentContext]
	require.NotNil(t, ctx)
	require.Equal(t, "admin", ctx.AuthInfo)
	require.Equal(t, "https://127.0.0.1:6443", cfg.Clusters[ctx.Cluster].Server)
	require.Equal(t, "/pki/ca.crt", cfg.Clusters[ctx.Cluster].CertificateAuthority)
	require.Equal(t, "/pki/admin.crt", cfg.AuthInfos["admin"].ClientCertificate)
	require.Equal(t, "/pki/admin.key", cfg.AuthInfos["admin"].ClientKey)
}
