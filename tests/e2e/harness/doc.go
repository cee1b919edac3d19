// Package harness runs real container engines for the end-to-end tests of
// xpu-cdi: Podman 4.3 (Debian), containerd 2.x and CRI-O 1.34 (built by
// hack/install-deps.sh into /usr/local/lib/xpu-cdi-tools/bin), containerd
// 1.6 and dockerd 20.10 (Debian). Nothing is mocked. The two engines that
// serve the Kubernetes CRI satisfy the interface CRI, so a table of CRI
// cases runs unchanged against each (CRIRun, CRIRunToCompletion).
//
// NewCluster starts a private single-node Kubernetes cluster (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, all
// v1.37.2 from ToolsBin) on one of those CRI engines: its own CA,
// certificates and service account key, loopback only, every file under a
// private directory. A kubelet uses machine-global paths (the device plugin
// directory, /var/log/containers, kernel tunables): ClaimKubeletHost takes
// a lock file so that test processes needing one take turns.
// WithControlPlaneOnly starts the same control plane without kubelet and
// CRI engine (and without the node lifecycle controller), for benchmarks
// against simulated nodes (bench/scale); it takes no lock.
//
// What it guarantees:
//   - Every engine runs with its own configuration, storage, state, sockets
//     and logs under a private temporary directory, and is stopped, its
//     containers killed and its mounts unmounted when the test ends, so the
//     temporary directory can be removed.
//   - Outside temporary directories the only host files it writes are CDI
//     specs for unique test vendors (UniqueVendor, InstallSpec) under
//     /var/run/cdi, removed at cleanup. Vendors outside the test domain
//     (TestVendorDomain) are refused, so real specs (baidu.com) are never
//     touched. Shims of containerd create their sockets under
//     /run/containerd/s as containerd always does; they remove them on exit.
//     A kubelet (ClaimKubeletHost) also uses /var/lib/kubelet/device-plugins
//     (created and removed when missing), links in /var/log/containers
//     (removed), kernel tunables (restored), the lock file
//     /run/xpu-cdi-e2e-kubelet.lock (kept, empty) and, in a cluster, the
//     cgroup /xe2e-k8s-<random> (removed).
//   - Test images are built locally from busybox-static (and the host's
//     glibc when asked); nothing is pulled from a registry.
//   - A missing prerequisite (root, a tool) skips the test on a developer
//     machine but fails it when CI=true or XPU_E2E_REQUIRE=1, with a hint to
//     run hack/install-deps.sh: CI never skips silently.
//
// What it does not do: it knows nothing about XPUs or about xpu-cdi; tests
// built on it bring their own specs, hooks and runtimes.
package harness
