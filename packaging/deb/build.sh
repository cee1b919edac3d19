#!/usr/bin/env bash
# Build dist/xpu-cdi_<version>_<arch>.deb with dpkg-buildpackage from a
# temporary copy of packaging/deb, so the source tree stays clean.
# Usage: packaging/deb/build.sh STAGEDIR DISTDIR PKG_VERSION
#   STAGEDIR is the output of packaging/stage.sh.
#   DEB_ARCH (default: dpkg's) is the package's architecture; another than
#   the host's is a cross build (dpkg-buildpackage -a, which strips with the
#   cross binutils aarch64-linux-gnu-strip that gcc-aarch64-linux-gnu brings).
set -euo pipefail

stage=$(cd "${1:?usage: build.sh STAGEDIR DISTDIR PKG_VERSION}" && pwd)
dist=${2:?DISTDIR}
version=${3:?PKG_VERSION}
here=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/xpu-cdi-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT

src=$work/xpu-cdi-$version
cp -a "$here" "$src"
rm -f "$src/build.sh"
cp -a "$stage" "$src/staging"

# README and docs/*.md, whichever exist.
(cd "$src" && find staging/doc -type f -name '*.md' | sort) >"$src/debian/xpu-cdi.docs"

# The changelog carries the version; it is written for each build.
cat >"$src/debian/changelog" <<CHANGELOG
xpu-cdi ($version) unstable; urgency=medium

  * Package built from the xpu-cdi repository (${COMMIT:-unknown commit}).

 -- xpu-cdi developers <xpu-cdi@lists.xpu-cdi.invalid>  $(date -R ${SOURCE_DATE_EPOCH:+-d @$SOURCE_DATE_EPOCH})
CHANGELOG

arch=${DEB_ARCH:-$(dpkg --print-architecture)}
cross=()
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
	# -d: the build dependencies are checked for the host (debhelper), not
	# as crossbuild-essential-$arch, which a package of prebuilt static
	# binaries does not need.
	# nocheck and the cross profile: nothing runs at build time (the
	# binaries are tested before they are staged).
	cross=(-a "$arch" -d -Pcross,nocheck)
	export DEB_BUILD_OPTIONS="nocheck${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}"
fi
(cd "$src" && dpkg-buildpackage -b -us -uc --no-sign "${cross[@]}")

deb=$work/xpu-cdi_${version}_${arch}.deb
test -f "$deb"
cp "$deb" "$dist/"
echo "deb: $dist/$(basename "$deb")"
