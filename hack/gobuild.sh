#!/usr/bin/env bash
# hack/gobuild.sh GOARCH OUTPUT PACKAGE [PACKAGE...]: the one recipe of
# xpu-cdi's binaries, used by make build, make demo, packaging/stage.sh and
# the end-to-end tests. With several packages, OUTPUT is a directory (ending
# in /) and they are built in one go build: what they share compiles once.
# Every binary is static (CGO_ENABLED=0): the hook and the shim run as root
# next to untrusted images and must never start the dynamic loader.
# urfave_cli_no_docs drops urfave/cli's man/markdown generator, whose init
# (blackfriday) cost about 1 ms at every start of the hook
# (docs/benchmarks.md). With VERSION set, the binary is stamped with
# VERSION and COMMIT (-X main.version, main.commit) and stripped; without,
# it keeps its symbols and says version "dev" (the tests' builds).
# GOTAGS adds build tags: no_podresources leaves the kubelet PodResources
# client (gRPC) out of xpu-cdi, for make demo (docs/development.md).
# Run from anywhere: PACKAGE is relative to the repository root.
set -euo pipefail

if [ $# -lt 3 ]; then
	echo "usage: hack/gobuild.sh GOARCH OUTPUT PACKAGE [PACKAGE...]" >&2
	exit 2
fi
goarch=$1 output=$2
shift 2
if [ $# -gt 1 ] && [ "${output%/}" = "$output" ]; then
	echo "hack/gobuild.sh: OUTPUT must be a directory ending in / for several packages, not $output" >&2
	exit 2
fi
case $output in
/*) ;;
*) output=$PWD/$output ;;
esac
cd "$(dirname "$0")/.."

ldflags=
if [ -n "${VERSION:-}" ]; then
	ldflags="-s -w -X main.version=$VERSION -X main.commit=${COMMIT:-unknown}"
fi
tags=urfave_cli_no_docs${GOTAGS:+,$GOTAGS}
exec env CGO_ENABLED=0 GOOS=linux GOARCH="$goarch" "${GO:-go}" build -trimpath -tags "$tags" \
	-ldflags "$ldflags" -o "$output" "$@"
