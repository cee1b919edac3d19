package harness

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// KubernetesVersion is the version of the Kubernetes commands
// hack/install-deps.sh builds into ToolsBin (kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, kubectl).
const KubernetesVersion = "v1.37.2"

// ClusterNode is the name of the cluster's only node. It is its address
// too: the kubelet refuses a loopback --node-ip, but takes a node name that
// is an IP as its InternalIP unchecked, and the API server must reach the
// kubelet (logs, exec) on the loopback address the kubelet listens on.
const ClusterNode = "127.0.0.1"

// ClusterStartTimeout bounds the start of each control plane component and
// the wait for the node to become Ready.
const ClusterStartTimeout = 3 * time.Minute

// clusterServiceCIDR is the service network; nothing routes it (there is no
// kube-proxy): pods reach the API server through InClusterEnv.
const clusterServiceCIDR = "10.96.0.0/24"

// Cluster is a private single-node Kubernetes cluster started for one test:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a kubelet
// on a CRI engine of the harness (containerd 2.x by default, CRI-O with
// WithClusterRuntime), all on 127.0.0.1 with free ports, its own CA,
// certificates and service account signing key, and every file under one
// private directory. Everything is stopped and removed at cleanup.
type Cluster struct {
	// Dir holds everything of the cluster (PKI, etcd data, logs, the
	// kubelet's root directory, kubeconfigs).
	Dir string
	// Node is the node name (ClusterNode).
	Node string
	// Kubeconfig is the path of a cluster-admin kubeconfig (system:masters).
	Kubeconfig string
	// Client is a clientset for Kubeconfig; Config its REST config.
	Client *kubernetes.Clientset
	Config *rest.Config
	// Runtime is the CRI engine the kubelet runs pods with (nil with
	// WithControlPlaneOnly).
	Runtime CRI
	// APIServerPort is the API server's port on 127.0.0.1 (https).
	APIServerPort int
	// KubeletRootDir is the kubelet's --root-dir: DRA plugins register in
	// PluginsRegistryDir() and serve below PluginsDir().
	KubeletRootDir string
	// StaticPodDir is the kubelet's staticPodPath.
	StaticPodDir string
	// EtcdURL is etcd's client URL (http, loopback): /metrics tells its
	// database size.
	EtcdURL string

	ca        *clusterCA
	etcd      *daemon
	apiserver *daemon
	kcm       *daemon
	scheduler *daemon
	kubelet   *daemon
	kubectl   command
	healthz   int
	busybox   string
}

type clusterOptions struct {
	runtime      func(t testing.TB) CRI
	featureGates []string
	nodeLabels   []string
	kubeletEdits []func(*kubeletconfig.KubeletConfiguration)
	controlPlane bool
	flags        map[string][]string
}

// ClusterOption configures NewCluster.
type ClusterOption func(*clusterOptions)

// WithClusterRuntime makes the node's CRI engine with start instead of
// NewContainerd(t); start runs before the kubelet, e.g.
// func(t testing.TB) harness.CRI { return harness.NewCRIO(t) }. NewCluster
// imports the sandbox image into it and writes its CNI configuration.
func WithClusterRuntime(start func(t testing.TB) CRI) ClusterOption {
	return func(o *clusterOptions) { o.runtime = start }
}

// WithFeatureGates passes --feature-gates (NAME=true,...) to every component.
func WithFeatureGates(gates ...string) ClusterOption {
	return func(o *clusterOptions) { o.featureGates = append(o.featureGates, gates...) }
}

// WithNodeLabels gives the node labels (KEY=VALUE) through the kubelet's
// --node-labels.
func WithNodeLabels(labels ...string) ClusterOption {
	return func(o *clusterOptions) { o.nodeLabels = append(o.nodeLabels, labels...) }
}

// WithKubeletConfig edits the kubelet's KubeletConfiguration after the
// harness has filled it in (writeKubeletConfig), before it is written.
func WithKubeletConfig(edit func(*kubeletconfig.KubeletConfiguration)) ClusterOption {
	return func(o *clusterOptions) { o.kubeletEdits = append(o.kubeletEdits, edit) }
}

// WithControlPlaneOnly starts etcd, the API server, the controller manager
// and the scheduler, and no kubelet and no CRI engine: the cluster has no
// node until the test creates Node objects, which stay as the test writes
// them. The controller manager runs without its node lifecycle controller,
// as upstream's scheduler_perf runs none: nothing marks a node that no
// kubelet renews NotReady or taints it unreachable. The API server's
// TaintNodesByCondition admission still gives a new node the not-ready
// taint, which the test removes once the node's status says Ready. The
// kubelet host lock is not taken, so such a cluster runs beside another
// test's kubelet.
func WithControlPlaneOnly() ClusterOption {
	return func(o *clusterOptions) { o.controlPlane = true }
}

// WithComponentFlags appends flags to the command line of one control
// plane component ("etcd", "kube-apiserver", "kube-controller-manager",
// "kube-scheduler"), after the harness's own, e.g. the client QPS of the
// scheduler for a benchmark.
func WithComponentFlags(component string, flags ...string) ClusterOption {
	return func(o *clusterOptions) {
		if o.flags == nil {
			o.flags = map[string][]string{}
		}
		o.flags[component] = append(o.flags[component], flags...)
	}
}

// NewCluster starts a single-node cluster and returns once the node is
// Ready without taints, the default service account exists and the root CA
// config map is published, so a pod can be created at once.
//
// What pods must know: there is no CNI network and no kube-proxy, so pods
// use hostNetwork: true (the node's loopback); a pod that talks to the API
// server sets InClusterEnv() in its containers; images are imported into
// the runtime (ImportImage, BusyboxImage) and pulled Never; the kubelet's
// directories are KubeletRootDir, PluginsRegistryDir() and PluginsDir(),
// and the device plugin directory is the machine's DevicePluginDir.
func NewCluster(t testing.TB, opts ...ClusterOption) *Cluster {
	t.Helper()
	RequiresRoot(t)
	o := clusterOptions{runtime: func(t testing.TB) CRI { return NewContainerd(t) }}
	for _, opt := range opts {
		opt(&o)
	}
	for name := range o.flags {
		switch name {
		case "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler":
		default:
			t.Fatalf("WithComponentFlags: unknown component %q", name)
		}
	}
	if o.controlPlane && (len(o.nodeLabels) > 0 || len(o.kubeletEdits) > 0) {
		t.Fatalf("WithControlPlaneOnly starts no kubelet: WithNodeLabels and WithKubeletConfig have nothing to configure")
	}
	tools := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}
	if !o.controlPlane {
		tools = append(tools, "kubelet")
	}
	bins := map[string]string{}
	for _, name := range tools {
		bins[name] = RequiresTool(t, filepath.Join(ToolsBin(), name))
	}
	dir := shortTempDir(t, "xe2e-k8s-")
	c := &Cluster{
		Dir:            dir,
		Node:           ClusterNode,
		Kubeconfig:     filepath.Join(dir, "admin.kubeconfig"),
		KubeletRootDir: filepath.Join(dir, "kubelet"),
		StaticPodDir:   filepath.Join(dir, "manifests"),
	}
	start := time.Now()
	if o.controlPlane {
		c.startControlPlane(t, &o, bins, nil)
		c.Node, c.KubeletRootDir, c.StaticPodDir = "", "", ""
		c.waitUsable(t)
		t.Logf("control plane %s ready in %s (%s)", KubernetesVersion, time.Since(start).Round(time.Millisecond), dir)
		return c
	}
	// The lock first: nothing of the kubelet's may be touched while another
	// test's kubelet runs.
	ClaimKubeletHost(t, c.Node, filepath.Join(dir, "pod-logs"))
	// The kubelet's cgroup root (its QoS and pod cgroups go below it):
	// removed once the runtime has removed the pods, so registered before
	// the runtime starts.
	cgroupRoot := "/" + filepath.Base(dir)
	if err := createCgroup(cgroupRoot); err != nil {
		t.Fatalf("creating the kubelet's cgroup root: %v", err)
	}
	t.Cleanup(func() {
		if err := removeCgroupTree(cgroupRoot); err != nil {
			t.Errorf("cleaning up the cgroups of the kubelet: %v", err)
		}
	})
	c.Runtime = o.runtime(t)
	PrepareCRI(t, c.Runtime)
	writeLoopbackCNI(t, c.Runtime)

	var pki clusterPKI
	c.startControlPlane(t, &o, bins, &pki)
	gates := o.gateFlags()
	env := []string{pathEnv(systemPath)}

	cfgPath := c.writeKubeletConfig(t, pki, cgroupRoot, o.kubeletEdits)
	kubeletArgs := append([]string{
		"--config=" + cfgPath, "--kubeconfig=" + pki.kubeletKubeconfig,
		"--root-dir=" + c.KubeletRootDir, "--cert-dir=" + filepath.Join(dir, "kubelet-certs"),
		"--hostname-override=" + c.Node, "--v=2",
	}, gates...)
	if len(o.nodeLabels) > 0 {
		kubeletArgs = append(kubeletArgs, "--node-labels="+strings.Join(o.nodeLabels, ","))
	}
	kubelet := bins["kubelet"]
	if ns, ok := c.Runtime.(mountNamespaced); ok {
		kubeletArgs = append([]string{"--mount=" + ns.MountNamespace(), "--", kubelet}, kubeletArgs...)
		kubelet = RequiresTool(t, "nsenter")
	}
	c.kubelet = startDaemonWithin(t, ClusterStartTimeout, "kubelet", dir, kubelet, kubeletArgs, env,
		httpReady("http://127.0.0.1:"+strconv.Itoa(c.healthz)+"/healthz", nil))
	// Registered after the kubelet: runs before it stops, so pods are
	// deleted through the API while the node still serves them.
	t.Cleanup(func() { c.deleteWorkloads(t) })

	c.waitNodeReady(t)
	c.waitUsable(t)
	t.Logf("cluster %s ready in %s (%s, %s)", KubernetesVersion, time.Since(start).Round(time.Millisecond), c.Runtime.EngineName(), dir)
	return c
}

// gateFlags is the --feature-gates flag of every component, if any.
func (o *clusterOptions) gateFlags() []string {
	if len(o.featureGates) == 0 {
		return nil
	}
	return []string{"--feature-gates=" + strings.Join(o.featureGates, ",")}
}

// startControlPlane writes the PKI (into pki when not nil) and starts etcd,
// the API server, the controller manager and the scheduler, and makes the
// admin client.
func (c *Cluster) startControlPlane(t testing.TB, o *clusterOptions, bins map[string]string, pki *clusterPKI) {
	t.Helper()
	if pki == nil {
		pki = &clusterPKI{}
	}
	c.APIServerPort = FreePort(t)
	*pki = c.writePKI(t)
	gates := o.gateFlags()
	env := []string{pathEnv(systemPath)}

	// etcd.
	etcdPort, peerPort := FreePort(t), FreePort(t)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	c.EtcdURL = etcdURL
	c.etcd = startDaemonWithin(t, ClusterStartTimeout, "etcd", c.Dir, bins["etcd"], append([]string{
		"--name", "xe2e", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--listen-peer-urls", "http://127.0.0.1:" + strconv.Itoa(peerPort),
		"--unsafe-no-fsync", "--log-level", "warn",
	}, o.flags["etcd"]...), env, httpReady(etcdURL+"/health", nil))

	// kube-apiserver.
	apiURL := "https://127.0.0.1:" + strconv.Itoa(c.APIServerPort)
	adminTLS, err := tls.LoadX509KeyPair(pki.admin.CertPath, pki.admin.KeyPath)
	if err != nil {
		t.Fatalf("loading the admin certificate: %v", err)
	}
	c.apiserver = startDaemonWithin(t, ClusterStartTimeout, "kube-apiserver", c.Dir, bins["kube-apiserver"], append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.APIServerPort),
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		"--tls-cert-file=" + pki.apiserver.CertPath, "--tls-private-key-file=" + pki.apiserver.KeyPath,
		"--client-ca-file=" + c.ca.CertPath,
		"--kubelet-client-certificate=" + pki.kubeletClient.CertPath, "--kubelet-client-key=" + pki.kubeletClient.KeyPath,
		"--kubelet-certificate-authority=" + c.ca.CertPath,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pki.saPublic, "--service-account-signing-key-file=" + pki.saPrivate,
		"--service-cluster-ip-range=" + clusterServiceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		// The kubernetes service's endpoint would be 127.0.0.1, which
		// endpoint validation refuses; nothing routes the service anyway.
		"--endpoint-reconciler-type=none",
		"--profiling=false", "--v=1",
	}, append(gates, o.flags["kube-apiserver"]...)...), env, httpReady(apiURL+"/readyz", &adminTLS))

	c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatalf("reading %s: %v", c.Kubeconfig, err)
	}
	c.Client, err = kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatalf("making a client for %s: %v", c.Kubeconfig, err)
	}
	c.kubectl = command{bin: bins["kubectl"], args: []string{"--kubeconfig", c.Kubeconfig}, env: env}

	// kube-controller-manager and kube-scheduler: /healthz is open to anyone.
	kcmFlags := o.flags["kube-controller-manager"]
	if o.controlPlane {
		kcmFlags = append([]string{"--controllers=*,-node-lifecycle-controller"}, kcmFlags...)
	}
	kcmPort, schedPort := FreePort(t), FreePort(t)
	c.kcm = startDaemonWithin(t, ClusterStartTimeout, "kube-controller-manager", c.Dir, bins["kube-controller-manager"], append([]string{
		"--kubeconfig=" + pki.kcmKubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(kcmPort),
		"--cert-dir=" + filepath.Join(c.Dir, "kcm-certs"),
		"--leader-elect=false",
		"--service-account-private-key-file=" + pki.saPrivate, "--root-ca-file=" + c.ca.CertPath,
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file=" + c.ca.CertPath, "--cluster-signing-key-file=" + c.ca.KeyPath,
		"--service-cluster-ip-range=" + clusterServiceCIDR,
		"--profiling=false", "--v=1",
	}, append(gates, kcmFlags...)...), env, httpReady("https://127.0.0.1:"+strconv.Itoa(kcmPort)+"/healthz", nil))
	c.scheduler = startDaemonWithin(t, ClusterStartTimeout, "kube-scheduler", c.Dir, bins["kube-scheduler"], append([]string{
		"--kubeconfig=" + pki.schedulerKubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(schedPort),
		"--leader-elect=false", "--profiling=false", "--v=1",
	}, append(gates, o.flags["kube-scheduler"]...)...), env, httpReady("https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz", nil))
}

// mountNamespaced is a CRI engine that runs in a mount namespace of its own
// (CRIO): the kubelet runs in it too, since the runtime binds the volumes
// the kubelet mounts into containers.
type mountNamespaced interface {
	MountNamespace() string
}

// clusterPKI is the paths of what writePKI made.
type clusterPKI struct {
	apiserver, admin, kubeletClient, kubeletServing certPair
	saPrivate, saPublic                             string
	kcmKubeconfig, schedulerKubeconfig              string
	kubeletKubeconfig                               string
}

// writePKI makes the CA, the serving and client certificates, the service
// account key pair and the kubeconfigs of every component.
func (c *Cluster) writePKI(t testing.TB) clusterPKI {
	t.Helper()
	pkiDir := filepath.Join(c.Dir, "pki")
	ca, err := newClusterCA(pkiDir)
	if err != nil {
		t.Fatalf("creating the cluster CA: %v", err)
	}
	c.ca = ca
	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	issue := func(req certRequest) certPair {
		p, err := ca.issue(req)
		if err != nil {
			t.Fatalf("creating the cluster's certificates: %v", err)
		}
		return p
	}
	var p clusterPKI
	p.apiserver = issue(certRequest{
		name: "apiserver", cn: "kube-apiserver",
		dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips: append(loopback, net.IPv4(10, 96, 0, 1)),
	})
	p.admin = issue(certRequest{name: "admin", cn: "xpu-e2e-admin", orgs: []string{"system:masters"}})
	p.kubeletClient = issue(certRequest{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}})
	p.kubeletServing = issue(certRequest{
		name: "kubelet-serving", cn: "system:node:" + c.Node, orgs: []string{"system:nodes"},
		dns: []string{"localhost"}, ips: loopback,
	})
	kcm := issue(certRequest{name: "kube-controller-manager", cn: "system:kube-controller-manager"})
	sched := issue(certRequest{name: "kube-scheduler", cn: "system:kube-scheduler"})
	node := issue(certRequest{name: "kubelet-client", cn: "system:node:" + c.Node, orgs: []string{"system:nodes"}})
	p.saPrivate, p.saPublic, err = newServiceAccountKey(pkiDir)
	if err != nil {
		t.Fatalf("creating the service account key: %v", err)
	}
	server := c.APIServerURL()
	write := func(path, user string, cp certPair) string {
		data, err := kubeconfig(server, ca.CertPath, user, cp)
		if err == nil {
			err = writeFile(path, data)
		}
		if err != nil {
			t.Fatalf("writing a kubeconfig: %v", err)
		}
		return path
	}
	write(c.Kubeconfig, "admin", p.admin)
	p.kcmKubeconfig = write(filepath.Join(c.Dir, "kube-controller-manager.kubeconfig"), "kube-controller-manager", kcm)
	p.schedulerKubeconfig = write(filepath.Join(c.Dir, "kube-scheduler.kubeconfig"), "kube-scheduler", sched)
	p.kubeletKubeconfig = write(filepath.Join(c.Dir, "kubelet.kubeconfig"), "kubelet", node)
	return p
}

// kubeconfig is a kubeconfig for one user authenticating with a client
// certificate, the one context of cluster xpu-e2e.
func kubeconfig(server, caPath, user string, cp certPair) ([]byte, error) {
	const name = "xpu-e2e"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caPath}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: cp.CertPath, ClientKey: cp.KeyPath}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}

// writeKubeletConfig writes the KubeletConfiguration: KubeletConfig's
// (loopback only, no eviction and no image garbage collection, every
// directory under Dir) with x509 client certificates of the cluster CA and
// no anonymous requests (the API server's certificate for logs and exec),
// the serving certificate of the cluster PKI, and the QoS and pod cgroups
// below cgroupRoot; then the test's WithKubeletConfig edits.
func (c *Cluster) writeKubeletConfig(t testing.TB, pki clusterPKI, cgroupRoot string, edits []func(*kubeletconfig.KubeletConfiguration)) string {
	t.Helper()
	port := FreePort(t)
	c.healthz = FreePort(t)
	for _, d := range []string{c.StaticPodDir, c.KubeletRootDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatalf("creating %s: %v", d, err)
		}
	}
	cfg := KubeletConfig(KubeletDirs{
		StaticPods:    c.StaticPodDir,
		PodLogs:       filepath.Join(c.Dir, "pod-logs"),
		VolumePlugins: filepath.Join(c.Dir, "volume-plugins"),
	}, port, c.healthz, c.Runtime.Endpoint())
	cfg.CgroupsPerQOS = ptr.To(true)
	cfg.CgroupRoot = cgroupRoot
	cfg.NodeStatusUpdateFrequency = metav1.Duration{Duration: 2 * time.Second}
	cfg.TLSCertFile, cfg.TLSPrivateKeyFile = pki.kubeletServing.CertPath, pki.kubeletServing.KeyPath
	cfg.Authentication.Anonymous.Enabled = ptr.To(false)
	cfg.Authentication.X509.ClientCAFile = c.ca.CertPath
	cfg.SerializeImagePulls = ptr.To(false)
	for _, edit := range edits {
		edit(cfg)
	}
	data, err := MarshalKubeletConfig(cfg)
	if err != nil {
		t.Fatalf("configuring the kubelet: %v", err)
	}
	path := filepath.Join(c.Dir, "kubelet.yaml")
	if err := writeFile(path, data); err != nil {
		t.Fatalf("configuring the kubelet: %v", err)
	}
	return path
}

// writeLoopbackCNI gives the engine a CNI network of the loopback plugin
// only: the kubelet reports a node Ready only once the runtime's network is
// ready, which needs a configuration. Pods use the host network; a pod
// without it would get no address and not start.
func writeLoopbackCNI(t testing.TB, cri CRI) {
	t.Helper()
	conf := `{"cniVersion": "1.0.0", "name": "xe2e-loopback", "plugins": [{"type": "loopback"}]}` + "\n"
	if err := writeFile(filepath.Join(cri.CNIConfDir(), "10-xe2e-loopback.conflist"), []byte(conf)); err != nil {
		t.Fatalf("configuring CNI for %s: %v", cri.EngineName(), err)
	}
}

// createCgroup creates the cgroup path in every hierarchy (cgroup v1) or in
// the unified one.
func createCgroup(path string) error {
	roots, err := filepath.Glob(filepath.Join(cgroupRoot, "*", "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("listing cgroup hierarchies: %w", err)
	}
	if len(roots) == 0 {
		roots = []string{filepath.Join(cgroupRoot, "cgroup.procs")}
	}
	for _, r := range roots {
		d := filepath.Dir(r) + path
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
	}
	return nil
}

// httpReady returns a readiness check that GETs url and wants 200; the
// server's certificate is not checked (the check only asks whether the
// process serves yet), a client certificate is sent when given.
func httpReady(url string, cert *tls.Certificate) func() error {
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a readiness probe of a loopback test process
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	return func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		if err := resp.Body.Close(); err != nil {
			return fmt.Errorf("GET %s: %w", url, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// ctx is a context bounded by ClusterStartTimeout for one API call or wait.
func (c *Cluster) ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ClusterStartTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitNodeReady waits until the node reports Ready and carries no taint
// (the node lifecycle controller removes node.kubernetes.io/not-ready).
func (c *Cluster) waitNodeReady(t testing.TB) {
	t.Helper()
	c.eventually(t, ClusterStartTimeout, "node "+c.Node+" Ready without taints", func() error {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), c.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
				return fmt.Errorf("condition Ready=%s: %s", cond.Status, cond.Message)
			}
			if cond.Type == corev1.NodeReady && len(n.Spec.Taints) > 0 {
				return fmt.Errorf("ready, still tainted %v", n.Spec.Taints)
			}
			if cond.Type == corev1.NodeReady {
				return nil
			}
		}
		return errors.New("no Ready condition yet")
	})
}

// waitUsable waits for what the controller manager makes before a pod can
// be created in the default namespace: its service account and the root CA
// config map of the projected service account volume.
func (c *Cluster) waitUsable(t testing.TB) {
	t.Helper()
	c.eventually(t, ClusterStartTimeout, "service account default/default and config map default/kube-root-ca.crt", func() error {
		if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := c.Client.CoreV1().ConfigMaps("default").Get(context.Background(), "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
}

// eventually polls check every 250 ms until it returns nil, failing the test
// with the last error after timeout.
func (c *Cluster) eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %v", timeout, what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// deleteWorkloads deletes, at cleanup, every DaemonSet, Deployment and pod
// of the namespaces tests use, and waits briefly for the kubelet to stop the
// pods, so that plugins in them unregister while the kubelet still runs.
// What remains is removed with the runtime.
func (c *Cluster) deleteWorkloads(t testing.TB) {
	t.Helper()
	if c.kubelet == nil {
		return
	}
	select {
	case <-c.kubelet.exited:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nss, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing namespaces at cleanup: %v", err)
		return
	}
	zero := int64(0)
	del := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	for _, ns := range nss.Items {
		_ = c.Client.AppsV1().DaemonSets(ns.Name).DeleteCollection(ctx, del, metav1.ListOptions{})
		_ = c.Client.AppsV1().Deployments(ns.Name).DeleteCollection(ctx, del, metav1.ListOptions{})
		_ = c.Client.CoreV1().Pods(ns.Name).DeleteCollection(ctx, del, metav1.ListOptions{})
	}
	for ctx.Err() == nil {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// PluginsRegistryDir is where kubelet plugins (DRA drivers) put their
// registration sockets: <KubeletRootDir>/plugins_registry.
func (c *Cluster) PluginsRegistryDir() string {
	return filepath.Join(c.KubeletRootDir, "plugins_registry")
}

// PluginsDir is the parent of the plugins' own directories
// (<PluginsDir>/<driver>/dra.sock): <KubeletRootDir>/plugins.
func (c *Cluster) PluginsDir() string { return filepath.Join(c.KubeletRootDir, "plugins") }

// SpecDir is the CDI spec directory of the node's runtime.
func (c *Cluster) SpecDir() string { return c.Runtime.SpecDir() }

// APIServerURL is https://127.0.0.1:<APIServerPort>.
func (c *Cluster) APIServerURL() string { return "https://127.0.0.1:" + strconv.Itoa(c.APIServerPort) }

// InClusterEnv are the variables a hostNetwork pod sets so that in-cluster
// client configuration reaches the API server on loopback (the service IP
// the kubelet would give is routed by nothing). Variables a container sets
// itself win over the kubelet's.
func (c *Cluster) InClusterEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(c.APIServerPort)},
	}
}

// Kubectl runs kubectl with the admin kubeconfig; a non-zero exit is
// returned, not a failure.
func (c *Cluster) Kubectl(t testing.TB, args ...string) Result {
	t.Helper()
	return c.kubectl.run(t, args...)
}

// MustKubectl is Kubectl that fails the test unless kubectl exits 0.
func (c *Cluster) MustKubectl(t testing.TB, args ...string) Result {
	t.Helper()
	return c.Kubectl(t, args...).RequireSuccess(t)
}

// Apply applies YAML manifests (several documents allowed) with
// `kubectl apply` and fails the test if kubectl refuses them.
func (c *Cluster) Apply(t testing.TB, manifests string) Result {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(manifests), 0o600); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	return c.MustKubectl(t, "apply", "-f", path)
}

// WaitPod waits up to timeout until the pod exists and ok(pod) is true, and
// returns it; the failure message carries the pod's status and events.
func (c *Cluster) WaitPod(t testing.TB, namespace, name string, timeout time.Duration, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	deadline := time.Now().Add(timeout)
	for {
		p, err := c.Client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			pod = p
			if ok(p) {
				return p
			}
		} else if !apierrors.IsNotFound(err) {
			t.Logf("getting pod %s/%s: %v", namespace, name, err)
		}
		if time.Now().After(deadline) {
			status := "not found"
			if pod != nil {
				status = fmt.Sprintf("phase %s, conditions %+v, container statuses %+v", pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses)
			}
			events := c.Kubectl(t, "get", "events", "--namespace", namespace, "--field-selector", "involvedObject.name="+name).Stdout
			t.Fatalf("pod %s/%s: condition not met after %s: %s\nevents:\n%s", namespace, name, timeout, status, events)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// WaitPodRunning waits until every container of the pod runs and is ready,
// failing at once if the pod fails.
func (c *Cluster) WaitPodRunning(t testing.TB, namespace, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	return c.WaitPod(t, namespace, name, timeout, func(p *corev1.Pod) bool {
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			t.Fatalf("pod %s/%s ended (%s: %s %s) instead of running", namespace, name, p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		return p.Status.Phase == corev1.PodRunning && podReady(p)
	})
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Logs returns the logs of a pod's container, through the API server and
// the kubelet.
func (c *Cluster) Logs(t testing.TB, namespace, pod, container string) string {
	t.Helper()
	data, err := c.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(c.ctx(t))
	if err != nil {
		t.Fatalf("logs of %s/%s container %s: %v", namespace, pod, container, err)
	}
	return string(data)
}

// Exec runs a command in a pod's container (`kubectl exec`); a non-zero exit
// is returned, not a failure.
func (c *Cluster) Exec(t testing.TB, namespace, pod, container string, cmd ...string) Result {
	t.Helper()
	return c.Kubectl(t, append([]string{"exec", "--namespace", namespace, pod, "--container", container, "--"}, cmd...)...)
}

// RestartKubelet stops the kubelet (SIGTERM) and starts it again with the
// same configuration and root directory; it returns once the kubelet
// answers and the node is Ready again. Running pods keep running.
func (c *Cluster) RestartKubelet(t testing.TB) {
	t.Helper()
	c.kubelet.Restart(t)
	c.waitNodeReady(t)
}

// RebootKubelet stops the kubelet (SIGTERM), calls down while the node has
// no kubelet (a test removes there what a reboot removes: containers,
// tmpfs), and starts the kubelet again with the same configuration and
// root directory; it returns once the node is Ready again.
func (c *Cluster) RebootKubelet(t testing.TB, down func()) {
	t.Helper()
	c.kubelet.stop(t)
	down()
	c.kubelet.start(t)
	c.waitNodeReady(t)
}

// ProcessID is the process ID of a component the harness started
// ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
// "kubelet"), 0 when it did not start it or it has exited: benchmarks read
// its /proc/PID/stat and status.
func (c *Cluster) ProcessID(component string) int {
	d := map[string]*daemon{
		"etcd": c.etcd, "kube-apiserver": c.apiserver, "kube-controller-manager": c.kcm,
		"kube-scheduler": c.scheduler, "kubelet": c.kubelet,
	}[component]
	if d == nil || d.cmd == nil || d.cmd.Process == nil {
		return 0
	}
	select {
	case <-d.exited:
		return 0
	default:
		return d.cmd.Process.Pid
	}
}

// KubeletLog is the kubelet's log so far (also APIServerLog, ...: the
// daemons' logs are printed when a test fails).
func (c *Cluster) KubeletLog() string { return c.kubelet.Log() }

// ImportImage imports the rootfs dir as image name into the node's runtime
// and returns its reference; pods use it with imagePullPolicy: Never.
func (c *Cluster) ImportImage(t testing.TB, rootfsDir, name string, opts ...ImageOption) string {
	t.Helper()
	return c.Runtime.ImportCRIImage(t, rootfsDir, name, opts...)
}

// BusyboxImage is a busybox-static image (Cmd sleep forever) in the node's
// runtime, imported on first use.
func (c *Cluster) BusyboxImage(t testing.TB) string {
	t.Helper()
	if c.busybox == "" {
		rootfs := t.TempDir()
		BuildBusyboxRootfs(t, rootfs)
		c.busybox = c.ImportImage(t, rootfs, "xpu-e2e-busybox", WithImageCmd("sleep", "2147483647"))
	}
	return c.busybox
}
