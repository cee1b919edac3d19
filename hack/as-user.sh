#!/usr/bin/env bash
# as-user.sh: a `go test -exec` program that runs each test binary as an
# unprivileged user (uid and gid 65534 unless XPU_UNIT_UID says otherwise),
# so that `make unit-user` proves the unit tests need no root: go test
# builds as the caller (root's warm caches), the tests run without root's
# permission bypass. Called by a user other than root it just runs the test.
#
# The user gets a state directory of its own (XPU_UNIT_USER_DIR, default
# /var/tmp/xpu-cdi-unit-user): HOME, TMPDIR and a GOCACHE it can write (kept
# between runs: the few tests that `go build` a binary fill it once, about
# 35 s on a fresh 2-core machine), and the caller's module cache read-only
# through a bind mount in a private mount namespace (a fresh machine's
# /root is 0700; nothing is copied). The tests that build a binary do so
# without VCS stamping: git refuses the user a checkout root owns.
set -euo pipefail

bin=$1
shift
if [ "$(id -u)" -ne 0 ]; then
	exec "$bin" "$@"
fi

uid=${XPU_UNIT_UID:-65534}
state=${XPU_UNIT_USER_DIR:-/var/tmp/xpu-cdi-unit-user}
install -d -m 0755 "$state" "$state/modcache"
install -d -m 0700 -o "$uid" -g "$uid" "$state/home" "$state/gocache" "$state/tmp"
# The test binary sits in go test's 0700 work directory: the user gets a copy.
dir=$(mktemp -d "$state/tmp/test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cp "$bin" "$dir/"
chown -R "$uid:$uid" "$dir"

modcache=$(go env GOMODCACHE)
# Not exec: the trap removes the copy when the test binary ends.
unshare --mount --propagation private -- sh -c '
	mount --bind -o ro "$1" "$2/modcache" || exit 1
	shift 2
	exec "$@"' sh "$modcache" "$state" \
	setpriv --reuid="$uid" --regid="$uid" --clear-groups \
	env HOME="$state/home" TMPDIR="$dir" GOCACHE="$state/gocache" GOMODCACHE="$state/modcache" \
	GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false" \
	"$dir/$(basename "$bin")" "$@"
