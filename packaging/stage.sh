#!/usr/bin/env bash
# Stage everything the .deb and the .rpm contain into one directory, so both
# packages are built from the very same files:
#
#   DIR/bin/        the binaries of cmd/binaries.txt that ship in the packages (static)
#   DIR/config.toml default /etc/xpu-container-toolkit/config.toml
#   DIR/partitions.conf /etc/xpu-cdi/partitions.conf (commented out)
#   DIR/man/        man pages (help2man from --help, or a short fallback)
#   DIR/doc/        README.md and docs/*.md
#   DIR/systemd/    units and preset;  DIR/udev/  the udev rule
#
# Usage: packaging/stage.sh DIR   (run from anywhere; env VERSION, COMMIT, GOARCH)
# The binaries are built by hack/gobuild.sh (static, -trimpath, stamped) for
# linux/$GOARCH (default: the host's), unless PREBUILT_BINDIR names a
# directory holding them already built that way; either way they must be
# ELF files for that architecture. For another architecture than the
# host's, the config and the man pages come from host builds of the same
# source (their output does not depend on the architecture).
# The xpu-cdi binary is required.
set -euo pipefail

out=${1:?usage: stage.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
pkgdir=$root/packaging
VERSION=${VERSION:-$("$pkgdir/pkg-version.sh")}
COMMIT=${COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}

warn() { echo "stage: warning: $*" >&2; }

host_arch=$(cd "$root" && go env GOHOSTARCH)
arch=${GOARCH:-$host_arch}
# e_machine of the ELF files each architecture runs (little-endian bytes 18-19).
case $arch in
amd64) machine="3e 00" ;;
arm64) machine="b7 00" ;;
*)
	echo "stage: GOARCH=$arch is not packaged (amd64 and arm64 are)" >&2
	exit 1
	;;
esac

gobuild() { # gobuild GOARCH OUTPUT PACKAGE
	VERSION=$VERSION COMMIT=$COMMIT "$root/hack/gobuild.sh" "$@"
}

# binaries.txt: name, where it ships, the man page's line.
list=$root/cmd/binaries.txt
mapfile -t binaries < <(awk '!/^#/ && NF && $2 ~ /(^|,)pkg(,|$)/ { print $1 }' "$list")
if [ ${#binaries[@]} -eq 0 ]; then
	echo "stage: $list names no binary of the packages" >&2
	exit 1
fi

rm -rf "$out"
mkdir -p "$out"/{bin,man,doc,systemd,udev}
out=$(cd "$out" && pwd)

for b in "${binaries[@]}"; do
	if [ -n "${PREBUILT_BINDIR:-}" ]; then
		if [ -x "$PREBUILT_BINDIR/$b" ]; then
			cp "$PREBUILT_BINDIR/$b" "$out/bin/$b"
		else
			warn "$PREBUILT_BINDIR/$b does not exist: $b is left out of the package"
		fi
		continue
	fi
	echo "stage: go build ./cmd/$b (linux/$arch)"
	gobuild "$arch" "$out/bin/$b" "./cmd/$b"
done
if [ ! -x "$out/bin/xpu-cdi" ]; then
	echo "stage: cmd/xpu-cdi is required (the units run it)" >&2
	exit 1
fi
for bin in "$out"/bin/*; do
	if [ "$(od -An -tx1 -j18 -N2 "$bin" | xargs)" != "$machine" ] || [ "$(head -c4 "$bin" | od -An -c | xargs)" != "177 E L F" ]; then
		echo "stage: $bin is not an ELF executable for $arch (e_machine $(od -An -tx1 -j18 -N2 "$bin" | xargs), want $machine)" >&2
		exit 1
	fi
done

# What runs here to write the config and the man pages: the staged binaries,
# or host builds of them when they are for another architecture.
run_dir=$out/bin
if [ "$arch" != "$host_arch" ]; then
	run_dir=$(mktemp -d "${TMPDIR:-/tmp}/xpu-cdi-stage-host.XXXXXX")
	trap 'rm -rf "$run_dir"' EXIT
	for bin in "$out"/bin/*; do
		b=$(basename "$bin")
		echo "stage: go build ./cmd/$b (linux/$host_arch, for the config and the man pages)"
		gobuild "$host_arch" "$run_dir/$b" "./cmd/$b"
	done
fi

# Default config: exactly what the tool prints (its own tests check that it
# parses back to the defaults).
if ! "$run_dir/xpu-cdi" config default >"$out/config.toml"; then
	echo "stage: 'xpu-cdi config default' failed" >&2
	exit 1
fi

# Man pages. help2man needs --help and --version to work; a binary whose
# --version fails gets a short hand-written page instead.
describe() {
	awk -v b="$1" '!/^#/ && $1 == b { $1 = ""; $2 = ""; sub(/^ +/, ""); print; exit }' "$list"
}
for bin in "$run_dir"/*; do
	b=$(basename "$bin")
	page=$out/man/$b.1
	if command -v help2man >/dev/null 2>&1 &&
		help2man --no-info --no-discard-stderr --section=1 --source="xpu-cdi $VERSION" \
			--name="$(describe "$b")" --output="$page" "$bin" 2>/dev/null; then
		continue
	fi
	warn "help2man failed on $b: writing a short man page"
	upper=$(echo "$b" | tr '[:lower:]' '[:upper:]')
	cat >"$page" <<MAN
.TH $upper 1 "" "xpu-cdi $VERSION" "User Commands"
.SH NAME
$b \\- $(describe "$b")
.SH SYNOPSIS
.B $b
[\\fIOPTIONS\\fR]
.SH DESCRIPTION
Run
.B "$b --help"
for the commands and options.
See /usr/share/doc/xpu-cdi for the documentation.
MAN
done

# Documentation.
for f in README.md; do
	[ -f "$root/$f" ] && cp "$root/$f" "$out/doc/" || warn "$f does not exist yet"
done
if [ -d "$root/docs" ]; then
	find "$root/docs" -maxdepth 1 -name '*.md' -exec cp {} "$out/doc/" \;
fi

cp "$pkgdir"/systemd/xpu-cdi-refresh.service "$pkgdir"/systemd/xpu-cdi-refresh.path "$pkgdir"/systemd/xpu-exporter.service \
	"$pkgdir"/systemd/xpu-cdi-partitions.service "$pkgdir"/systemd/50-xpu-cdi.preset "$out/systemd/"
# The partition layout read at boot: every line commented out (nothing changes).
cp "$pkgdir"/etc/partitions.conf "$out/partitions.conf"
cp "$pkgdir"/udev/71-xpu-cdi.rules "$out/udev/"
echo "stage: $(find "$out" -type f | wc -l) files in $out"
