#!/usr/bin/env bash
# Install the Debian packages needed to build and check the xpu-cdi .deb and .rpm
# (make deb, make rpm, make packaging-test). Idempotent: installs only what is
# missing, and runs apt-get update only when something has to be installed.
# The test runtimes (podman, containerd, ...) are installed by hack/install-deps.sh.
set -euo pipefail

pkgs=(
	build-essential # dpkg-buildpackage needs the build-essential set
	binutils-aarch64-linux-gnu # strip for the arm64 .deb and the aarch64 .rpm (GOARCH=arm64)
	debhelper       # dh, dh_installsystemd, dh_installudev (compat 13)
	dpkg-dev
	fakeroot
	help2man        # man pages generated from --help
	lintian
	rpm             # rpmbuild, rpm --root installs
	rpmlint
	systemd         # systemd-analyze verify on the units
)

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing+=("$p")
	fi
done

if [ "${#missing[@]}" -eq 0 ]; then
	echo "install-build-deps: all present"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-build-deps: missing ${missing[*]}; run as root to install them" >&2
	exit 1
fi

echo "install-build-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
