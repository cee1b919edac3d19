// Package testenv builds the fixtures that the end-to-end tests
// (tests/e2e/harness) and the benchmark (bench/cmd/xpu-bench) share: small
// container image roots made from the host's files, and the configuration of
// a private Podman. It is for tests and benchmarks only and is never part of
// a shipped binary.
//
// Image roots (BuildBusyboxRootfs, BuildGlibcRootfs, AddBaseImageLibs,
// WriteLDCache, Tar) are built from busybox-static and the host's glibc:
// nothing is pulled from a registry. A private Podman (WritePodmanConfig)
// keeps its configuration, storage, runtime state, events and volumes under
// one directory and runs containers with the given runc, cgroupfs, no
// network and nofile/nproc limits of 1024, so it leaves the host's Podman
// alone. BuildSharedLibrary compiles the small real ELF shared objects the
// loader-cache, SONAME-scanner and hook tests read.
//
// Every function returns an error and never skips or fails a test: callers
// decide whether a missing tool is a skip (the harness on a developer
// machine), a failed test, or a failed benchmark row.
package testenv
