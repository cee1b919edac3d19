#!/usr/bin/env bash
# Build dist/xpu-cdi_<version>_<arch>.deb with dpkg-buildpackage from a
# temporary copy of packaging/deb, so the source tree stays clean.
# Usage: packaging/deb/build.sh STAGEDIR DISTDIR PKG_VERSION
#   STAGEDIR is the output of packaging/stage.sh.
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

(cd "$src" && dpkg-buildpackage -b -us -uc --no-sign)

arch=$(dpkg --print-architecture)
deb=$work/xpu-cdi_${version}_${arch}.deb
test -f "$deb"
cp "$deb" "$dist/"
echo "deb: $dist/$(basename "$deb")"
