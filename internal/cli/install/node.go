package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// The pod's service account, as the kubelet mounts it.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// maxNodeSize bounds the Node read from the API server (its status lists
// the node's images, which can run to hundreds of kB).
const maxNodeSize = 16 << 20

// Bounds of the service account's files, read as regular files on an
// ordinary file system without waiting (fdio): a CA bundle of a few
// certificates, a token of a few kB.
const (
	maxCASize    = 1 << 20
	maxTokenSize = 64 << 10
)

// nodeClient reads the pod's own Node through the API server's REST API
// with the pod's service account (in-cluster), so that xpu-cdi, which the
// host package also runs at every device event, does not link client-go.
// The token is read at each request: the kubelet rotates it.
type nodeClient struct {
	base      string // https://host:port
	tokenFile string
	http      *http.Client
}

// newNodeClient is the in-cluster client of the pod dir's service account
// (dir: serviceAccountDir) and the API server KUBERNETES_SERVICE_HOST and
// _PORT name.
func newNodeClient(dir string) (*nodeClient, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (the chart runs the installer with a service account when partitions are configured)")
	}
	ca, _, err := fdio.ReadFileAt(unix.AT_FDCWD, filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.crt"), 0, maxCASize)
	if err != nil {
		return nil, fmt.Errorf("the service account's CA: %w (is a service account token mounted?)", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("the service account's CA %s holds no PEM certificate", filepath.Join(dir, "ca.crt"))
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &nodeClient{
		base:      "https://" + net.JoinHostPort(host, port),
		tokenFile: filepath.Join(dir, "token"),
		http: &http.Client{
			Transport: tr, Timeout: nodeTimeout,
			// A redirect is not followed: Go's client would send the
			// token along to another port or scheme of the same host.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// labels returns the labels of node name. resourceVersion=0: the API
// server answers from its watch cache, without a read of etcd (a label
// seconds old is fine).
func (c *nodeClient) labels(ctx context.Context, name string) (map[string]string, error) {
	token, _, err := fdio.ReadFileAt(unix.AT_FDCWD, c.tokenFile, c.tokenFile, 0, maxTokenSize)
	if err != nil {
		return nil, fmt.Errorf("the service account's token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v1/nodes/"+url.PathEscape(name)+"?resourceVersion=0", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getting node %s: %w", name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxNodeSize+1))
	if err != nil {
		return nil, fmt.Errorf("getting node %s: %w", name, err)
	}
	if len(body) > maxNodeSize {
		return nil, fmt.Errorf("getting node %s: the answer is larger than %d bytes", name, maxNodeSize)
	}
	if resp.StatusCode != http.StatusOK {
		var status struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &status)
		return nil, fmt.Errorf("getting node %s: %s: %s (the installer's ClusterRole gives get on nodes)", name, resp.Status, status.Message)
	}
	var node struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &node); err != nil {
		return nil, fmt.Errorf("getting node %s: decoding the answer: %w", name, err)
	}
	return node.Metadata.Labels, nil
}
