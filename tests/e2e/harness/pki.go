package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// clusterCA is the private certificate authority of one test cluster: every
// component's serving and client certificate is signed by it, and every
// component trusts only it. Keys are ECDSA P-256 (cheap to make on a busy
// machine; every Kubernetes component accepts them).
type clusterCA struct {
	dir  string
	cert *x509.Certificate
	key  crypto.Signer
	// CertPath is the CA certificate (PEM), the --client-ca-file and
	// certificate-authority of every kubeconfig.
	CertPath string
	KeyPath  string
}

// certPair is a certificate and its key written as PEM files.
type certPair struct {
	CertPath, KeyPath string
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// newClusterCA makes a self-signed CA valid for a day and writes it to dir.
func newClusterCA(dir string) (*clusterCA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "xpu-cdi-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	ca := &clusterCA{
		dir: dir, cert: cert, key: key,
		CertPath: filepath.Join(dir, "ca.crt"), KeyPath: filepath.Join(dir, "ca.key"),
	}
	if err := writePEM(ca.CertPath, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writeKey(ca.KeyPath, key); err != nil {
		return nil, err
	}
	return ca, nil
}

// certRequest says what a leaf certificate is for.
type certRequest struct {
	// name is the file name stem (name.crt, name.key).
	name string
	// cn and orgs are the Kubernetes user and groups of a client
	// certificate (system:node:NODE / system:nodes, system:masters, ...).
	cn   string
	orgs []string
	// dns and ips are the serving names; a certificate with none is a
	// client certificate only.
	dns []string
	ips []net.IP
}

// issue signs a leaf certificate for req and writes it and its key.
func (ca *clusterCA) issue(req certRequest) (certPair, error) {
	key, err := newKey()
	if err != nil {
		return certPair{}, fmt.Errorf("generating the key of %s: %w", req.name, err)
	}
	sn, err := serial()
	if err != nil {
		return certPair{}, fmt.Errorf("generating a serial number: %w", err)
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if len(req.dns) > 0 || len(req.ips) > 0 {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: req.cn, Organization: req.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		DNSNames:     req.dns,
		IPAddresses:  req.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return certPair{}, fmt.Errorf("signing the certificate of %s: %w", req.name, err)
	}
	p := certPair{CertPath: filepath.Join(ca.dir, req.name+".crt"), KeyPath: filepath.Join(ca.dir, req.name+".key")}
	if err := writePEM(p.CertPath, "CERTIFICATE", der); err != nil {
		return certPair{}, err
	}
	if err := writeKey(p.KeyPath, key); err != nil {
		return certPair{}, err
	}
	return p, nil
}

// newServiceAccountKey writes the key pair that signs service account
// tokens: the private key for the API server's
// --service-account-signing-key-file and the controller manager, the public
// key for --service-account-key-file.
func newServiceAccountKey(dir string) (private, public string, err error) {
	key, err := newKey()
	if err != nil {
		return "", "", fmt.Errorf("generating the service account key: %w", err)
	}
	private, public = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := writeKey(private, key); err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", fmt.Errorf("encoding the service account public key: %w", err)
	}
	if err := writePEM(public, "PUBLIC KEY", der); err != nil {
		return "", "", err
	}
	return private, public, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

// writePEM writes one PEM block, readable by the owner only (keys and
// certificates alike: nothing else on the machine needs them).
func writePEM(path, kind string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
