// Package harness runs real container engines for the end-to-end tests of
// xpu-cdi: Podman 4.3 (Debian), containerd 2.x and CRI-O 1.34 (built by
// hack/install-deps.sh into /usr/local/lib/xpu-cdi-tools/bin), containerd
// 1.6 and dockerd 20.10 (Debian). Nothing is mocked. The two engines that
// serve the Kubernetes CRI satisfy the interface CRI, so a table of CRI
// cases runs unchanged against each (CRIRun, CRIRunToCompletion).
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
//   - Test images are built locally from busybox-static (and the host's
//     glibc when asked); nothing is pulled from a registry.
//   - A missing prerequisite (root, a tool) skips the test on a developer
//     machine but fails it when CI=true or XPU_E2E_REQUIRE=1, with a hint to
//     run hack/install-deps.sh: CI never skips silently.
//
// What it does not do: it knows nothing about XPUs or about xpu-cdi; tests
// built on it bring their own specs, hooks and runtimes.
package harness
