#!/usr/bin/env bash
# Build dist/xpu-cdi-<version>-1.<arch>.rpm with rpmbuild from
# packaging/rpm/xpu-cdi.spec and the files packaging/stage.sh prepared.
# Usage: packaging/rpm/build.sh STAGEDIR DISTDIR PKG_VERSION
# Build dependencies are not checked (--nodeps): on Debian the rpm database
# is empty; systemd-rpm-macros is replaced by fallbacks in the spec.
# RPM_ARCH (default: rpm's) is the package's architecture (x86_64, aarch64):
# another than the host's is built with rpmbuild --target.
set -euo pipefail

stage=$(cd "${1:?usage: build.sh STAGEDIR DISTDIR PKG_VERSION}" && pwd)
dist=${2:?DISTDIR}
version=${3:?PKG_VERSION}
here=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
top=$(mktemp -d "${TMPDIR:-/tmp}/xpu-cdi-rpm.XXXXXX")
trap 'rm -rf "$top"' EXIT
mkdir -p "$top"/{SOURCES,BUILD,RPMS,SRPMS,SPECS}

tar -C "$stage" --owner=0 --group=0 -cf "$top/SOURCES/xpu-cdi-stage.tar" .
cp "$here/xpu-cdi.spec" "$top/SPECS/"

arch=${RPM_ARCH:-$(rpm --eval '%{_arch}')}
cross=()
if [ "$arch" != "$(rpm --eval '%{_arch}')" ]; then
	# The host's strip cannot read another architecture's ELF files: use
	# the cross binutils' (binutils-aarch64-linux-gnu).
	strip=$arch-linux-gnu-strip
	command -v "$strip" >/dev/null || {
		echo "rpm: $strip not found (install binutils-$arch-linux-gnu: packaging/install-build-deps.sh)" >&2
		exit 1
	}
	cross=(--define "__strip $strip")
fi
rpmbuild -bb --nodeps --target "$arch" "${cross[@]}" \
	--define "_topdir $top" \
	--define "pkg_version $version" \
	--define "_buildhost localhost" \
	--define "changelog_date $(LC_ALL=C date -u ${SOURCE_DATE_EPOCH:+-d @$SOURCE_DATE_EPOCH} '+%a %b %d %Y')" \
	"$top/SPECS/xpu-cdi.spec"

rpmfile=$top/RPMS/$arch/xpu-cdi-$version-1.$arch.rpm
test -f "$rpmfile"
cp "$rpmfile" "$dist/"
echo "rpm: $dist/$(basename "$rpmfile")"
