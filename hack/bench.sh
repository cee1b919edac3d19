#!/usr/bin/env bash
# bench.sh: measure what xpu-cdi adds to container starts and how spec generation scales, side by side
# with plain runc and Podman; print one table and write it to bench/results.md (docs/benchmarks.md).
#
# Runs as root (runc, Podman, device nodes). Installs what it needs, builds static binaries into a
# temporary directory, runs the Go benchmarks of pkg/discover, pkg/cdispec, internal/hook, internal/partition and internal/dra
# (the DRA driver's Prepare: median and p99 for claims of 1 and 8 XPUs) and tests/e2e's BenchmarkPodStart (a pod
# with one XPU through the DRA driver and through the device plugin, on the private test cluster), then
# bench/cmd/xpu-bench. Everything it creates (containers, bundles, fake hosts, Podman storage, the test
# CDI spec in /var/run/cdi) is removed when it ends, also on Ctrl-C.
#
# Environment:
#   XPU_BENCH_RUNS=N       measured runs per configuration (default 30; sections scale it)
#   XPU_BENCH_ONLY=a,b     sections: generate,gobench,shim,hooks,podman,concurrent (default all)
#   XPU_BENCH_OUT=FILE     results file (default bench/results.md; empty: do not write)
#   XPU_BENCH_SHIM=worktree  also measure an uncommitted cmd/xpu-container-runtime
set -euo pipefail

cd "$(dirname "$0")/.."

die() {
	echo "bench: $*" >&2
	exit 1
}

[[ $(id -u) -eq 0 ]] || die "must run as root (runc, Podman, device nodes); try: sudo make bench"

# Only the Debian packages: podman, runc, busybox-static, hyperfine, valgrind, gcc (fake host ELF files).
# The Go tools of install-deps.sh (containerd 2.x, crictl, golangci-lint) are not used here.
hack/install-deps.sh --quiet --only apt

GO=${GO:-go}
work=$(mktemp -d /tmp/xpu-bench-build.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The shipped binaries' recipe, stamped and stripped as make build's.
build() {
	VERSION=${VERSION:-bench} GO=$GO hack/gobuild.sh "$("$GO" env GOARCH)" "$work/bin/$1" "./cmd/$1"
}
echo "bench: building xpu-cdi, xpu-runtime-hook" >&2
build xpu-cdi
build xpu-runtime-hook
CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$work/bin/xpu-bench-noop" ./bench/cmd/xpu-bench-noop
CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$work/bin/xpu-bench-exec" ./bench/cmd/xpu-bench-exec

# GNU time measures the shim's peak RSS (see bench/cmd/xpu-bench/proc.go).
if [[ ! -x /usr/bin/time ]]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends time >/dev/null || die "installing time failed"
fi

shim_args=()
if [[ -n $(git ls-files -- 'cmd/xpu-container-runtime/*.go') || ${XPU_BENCH_SHIM:-} == worktree ]]; then
	echo "bench: building xpu-container-runtime" >&2
	if ! build xpu-container-runtime 2>"$work/shim-build.log"; then
		cat "$work/shim-build.log" >&2
		shim_args=(--no-shim-reason "does not build (see the build errors above)")
	fi
else
	shim_args=(--no-shim-reason "not built yet (cmd/xpu-container-runtime has no committed Go files)")
fi

only=${XPU_BENCH_ONLY:-}
gobench=()
if [[ -z $only || ,$only, == *,gobench,* ]]; then
	echo "bench: go test -bench (pkg/discover, pkg/cdispec, internal/hook, internal/partition, internal/dra)" >&2
	# The discover and cdi benchmarks build their fake hosts on /dev/shm themselves.
	if "$GO" test -run '^$' -bench . -benchmem -benchtime 300ms -count 1 \
		./pkg/discover ./pkg/cdispec ./internal/hook ./internal/partition ./internal/dra >"$work/gobench.txt" 2>&1; then
		gobench=(--gobench "$work/gobench.txt")
	else
		cat "$work/gobench.txt" >&2
		die "go test -bench failed"
	fi
	# Pod start with one XPU, DRA driver against device plugin, on the private test cluster (needs the
	# Kubernetes tools of install-deps.sh --only kubernetes; waits for the machine's kubelet lock).
	echo "bench: go test -bench BenchmarkPodStart (tests/e2e: DRA driver and device plugin on a test cluster)" >&2
	if ! "$GO" test -run '^$' -bench BenchmarkPodStart -benchtime 10x -count 1 -timeout 20m \
		./tests/e2e >"$work/podstart.txt" 2>&1; then
		cat "$work/podstart.txt" >&2
		die "go test -bench BenchmarkPodStart failed"
	fi
	grep -E '^(pkg:|BenchmarkPodStart)' "$work/podstart.txt" >>"$work/gobench.txt"
fi

"$GO" build -o "$work/xpu-bench" ./bench/cmd/xpu-bench
XPU_BENCH_COMMIT=$(git describe --always --dirty 2>/dev/null || echo unknown) \
	"$work/xpu-bench" --bin "$work/bin" --runs "${XPU_BENCH_RUNS:-30}" --out "${XPU_BENCH_OUT-bench/results.md}" \
	${only:+--only "$only"} "${gobench[@]}" "${shim_args[@]}"
