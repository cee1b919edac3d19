#!/usr/bin/env bash
# install-deps.sh: install what xpu-cdi's builds, packaging checks and end-to-end tests need on a
# Debian bookworm machine: container engines (Podman 4.3, Docker 20.10, containerd 1.6 from Debian,
# containerd 2.x and CRI-O built from source), build and packaging tools; and, for `make lint` only, the Go
# linters (the group lint).
#
# Idempotent: only what is missing is installed, `apt-get update` runs at most once and only when a
# package is missing, Go tools are rebuilt only when the installed binary is not the pinned version.
# When everything is present it finishes in well under two seconds.
#
# A first run on a fresh machine is mostly Go builds (docs/development.md, "Time budget"). Each build that
# takes more than a minute says, before it starts, what it builds and how long it usually takes. The longest,
# Kubernetes with etcd, needs nothing from apt: without --only it runs in the background while the apt,
# arm64 and trixie groups download and unpack; the other Go tools follow them (CRI-O's pinns needs gcc).
#
# Go tools go to a dedicated directory (default /usr/local/lib/xpu-cdi-tools/bin, override with
# XPU_CDI_TOOLS_BIN) so containerd 2.x never shadows Debian's containerd 1.6 in /usr/bin.
#
# The arm64 group (qemu-user-static, libc6:arm64 through dpkg multiarch, gcc-aarch64-linux-gnu) is what the
# aarch64 tests need: fake aarch64 hosts compiled with the cross compiler and a real aarch64 loader run under
# qemu-aarch64 (docs/packaging.md, "Architectures").
#
# The trixie group is a Debian 13 root file system (mmdebstrap, from Debian's packages) with trixie's own
# engines (Podman 5.4, Docker 26, containerd 1.7, runc, crun), cached in ${XPU_CDI_TRIXIE_ROOT} (default
# /var/cache/xpu-cdi/trixie): the tests run these engines in a chroot of a copy-on-write view of it
# (tests/e2e/harness/trixie.go). It is built again only when its recipe (suite, variant, package list)
# changes; building it takes about four minutes.
#
# Usage: hack/install-deps.sh [--only go|apt|arm64|trixie|kubernetes|helm|lint|demo] [--quiet]
set -euo pipefail

readonly TOOLS_BIN="${XPU_CDI_TOOLS_BIN:-/usr/local/lib/xpu-cdi-tools/bin}"

readonly CONTAINERD_MODULE="github.com/containerd/containerd/v2"
readonly CONTAINERD_VERSION="v2.4.2"
readonly CRICTL_MODULE="sigs.k8s.io/cri-tools"
readonly CRICTL_VERSION="v1.37.0"
readonly GOLANGCI_MODULE="github.com/golangci/golangci-lint/v2"
readonly GOLANGCI_VERSION="v2.15.0"
# CRI-O: the only version the module proxy serves (its go.mod has no replace directives), built in a
# copy of the downloaded module (see install_crio). The tags drop what needs C libraries Debian would
# have to provide (gpgme, ostree, btrfs); without the seccomp tag CRI-O applies no seccomp profile,
# which the tests do not need.
readonly CRIO_MODULE="github.com/cri-o/cri-o"
readonly CRIO_VERSION="v1.34.0"
readonly CRIO_TAGS="containers_image_openpgp,containers_image_ostree_stub,exclude_graphdriver_btrfs,btrfs_noversion"
# Kubernetes, for the tests' private single-node cluster (tests/e2e/harness/cluster.go). k8s.io/kubernetes is
# not meant to be a dependency: a throwaway wrapper module requires it and replaces each of its staging
# modules (./staging/src/k8s.io/NAME in its go.mod) with k8s.io/NAME at the matching v0 version. The five
# commands are built by one `go build` so they compile the packages they share once.
readonly KUBERNETES_MODULE="k8s.io/kubernetes"
readonly KUBERNETES_VERSION="v1.37.2"
readonly KUBERNETES_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
# etcd: its modules carry replace directives, so `go install go.etcd.io/etcd/server/v3@...` is refused; the
# cluster's etcd is hack/etcd-embed, a small program (its own module) on go.etcd.io/etcd/server/v3/embed.
readonly ETCD_MODULE="go.etcd.io/etcd/server/v3"
readonly ETCD_VERSION="v3.7.3"
# Helm, for the chart's tests.
readonly HELM_MODULE="helm.sh/helm/v3"
readonly HELM_VERSION="v3.22.0"

# How long each first build took on a fresh two-core machine (empty Go build cache), announced before it
# starts; docs/development.md ("Time budget") says how they were measured.
readonly ABOUT_KUBERNETES="about 14 min"
readonly ABOUT_CONTAINERD="about 2.5 min"
readonly ABOUT_GOLANGCI="about 2 to 5 min"
readonly ABOUT_CRIO="about 3.5 min"
readonly ABOUT_HELM="about 2 min"
readonly ABOUT_ETCD="about 1 min"
readonly ABOUT_TRIXIE="about 1.5 min"

# Engines and runtime pieces: installed with their recommended packages (fuse-overlayfs, slirp4netns,
# uidmap, ... are what Podman is tested with on Debian).
readonly APT_ENGINES=(podman runc busybox-static docker.io conmon containernetworking-plugins)
# Build, packaging and measuring tools: no recommends (devscripts alone would pull in hundreds of MB).
# prometheus: the real server (and promtool) the exporter's end-to-end test starts with its own config.
readonly APT_TOOLS=(gcc libc6-dev make git lintian debhelper devscripts rpm rpmlint systemd hyperfine valgrind prometheus)
# What `make demo` (hack/demo.sh) runs, and nothing else, without recommended packages: Podman with runc for
# the container (as root, on a root filesystem of its own, without network: no fuse-overlayfs, slirp4netns,
# buildah or CNI plugins), busybox for its image, gcc for the fake host's ELF files (make is what started the
# demo; conmon comes with podman).
readonly APT_DEMO_ENGINES=()
readonly APT_DEMO_TOOLS=(podman runc busybox-static gcc libc6-dev)
# The aarch64 tests: the user-mode emulator (static, so binfmt_misc's F flag can register it), the arm64 C
# library (a real aarch64 loader and libc for the test roots) and the cross compiler of the fake aarch64 XRE
# with its C library (a Recommends of the compiler, which --no-install-recommends leaves out).
readonly ARM64_ARCH=arm64
readonly APT_ARM64=(qemu-user-static "libc6:${ARM64_ARCH}" gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
# The Debian 13 test host: a root file system of trixie's engines. busybox-static is the tests' image,
# init-system-helpers what the package's maintainer scripts call (deb-systemd-helper). Keep the list in
# step with tests/e2e/harness/trixie.go (TrixieEngines).
readonly TRIXIE_ROOT="${XPU_CDI_TRIXIE_ROOT:-/var/cache/xpu-cdi/trixie}"
readonly TRIXIE_SUITE=trixie
readonly TRIXIE_VARIANT=apt
readonly TRIXIE_PACKAGES=(podman runc crun conmon docker.io containerd ca-certificates busybox-static init-system-helpers)

only=""
quiet=0

usage() {
	cat <<EOF
Usage: $0 [--only go|apt|arm64|trixie|kubernetes|helm|lint|demo] [--quiet]

Installs what the tests need, only when missing (no --only: every group but lint):
  apt:     ${APT_ENGINES[*]} ${APT_TOOLS[*]}
  arm64:   ${APT_ARM64[*]} (adds the dpkg architecture ${ARM64_ARCH})
  trixie:  a Debian 13 root file system in ${TRIXIE_ROOT} (mmdebstrap, installed with apt):
           ${TRIXIE_PACKAGES[*]}
  go:      containerd, ctr, containerd-shim-runc-v2 ${CONTAINERD_VERSION}, crictl ${CRICTL_VERSION},
           crio ${CRIO_VERSION} (go build in the module) and its
           pinns (make -C pinns), helm ${HELM_VERSION}, ${KUBERNETES_CMDS[*]}
           ${KUBERNETES_VERSION} (one go build) and etcd ${ETCD_VERSION} (hack/etcd-embed) into ${TOOLS_BIN}
  kubernetes: only the Kubernetes commands and etcd (part of go; their first build takes many minutes;
           "kubelet" is an older name for this group)
  helm:    only helm (part of go)
  lint:    golangci-lint ${GOLANGCI_VERSION} into ${TOOLS_BIN}, for make lint (no test runs it)
  demo:    only what make demo runs: ${APT_DEMO_TOOLS[*]} (without recommends)

  --only GROUP   install only that group
  --quiet        print only what was installed (and errors)
EOF
}

die() {
	echo "install-deps: $*" >&2
	exit 1
}

# say prints a status line; "present" lines are dropped with --quiet.
say() {
	local kind=$1
	shift
	if [[ $kind == present && $quiet -eq 1 ]]; then
		return
	fi
	printf '%-9s %s\n' "$kind" "$*"
}

# announce says, before a build that takes more than a minute starts, what it builds and how long it
# usually takes; printed with --quiet too, so a long silence is never a surprise.
announce() {
	local what=$1 about=$2
	[[ -n $about ]] || return 0
	printf '%-9s %s: %s on 2 cores\n' building "$what" "$about"
}

while [[ $# -gt 0 ]]; do
	case $1 in
	--only)
		[[ $# -ge 2 ]] || die "--only needs an argument: go, apt, arm64, trixie, kubernetes, helm, lint or demo"
		only=$2
		shift 2
		;;
	--only=*)
		only=${1#--only=}
		shift
		;;
	--quiet | -q)
		quiet=1
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		die "unknown argument: $1"
		;;
	esac
done
case $only in
"" | go | apt | arm64 | trixie | kubernetes | kubelet | helm | lint | demo) ;;
*) die "--only takes go, apt, arm64, trixie, kubernetes, helm, lint or demo, not '$only'" ;;
esac

if [[ $(id -u) -ne 0 ]]; then
	die "must run as root (it installs Debian packages and writes ${TOOLS_BIN}); try: sudo $0 $*"
fi

# run executes a long command; with --quiet its output goes to a log shown only when it fails.
run() {
	if [[ $quiet -eq 0 ]]; then
		"$@"
		return
	fi
	local log
	log=$(mktemp /tmp/install-deps.XXXXXX.log)
	if ! "$@" >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		return 1
	fi
	rm -f "$log"
}

# ---------------------------------------------------------------------------------------------- apt

# missing_packages prints the packages of "$@" that dpkg does not report as installed.
missing_packages() {
	local -A installed=()
	local name arch status
	# Both names count: libc6 and libc6:arm64 (a foreign architecture's package).
	while IFS=' ' read -r name arch status; do
		[[ $status == installed ]] && installed[$name]=1 && installed[$name:$arch]=1
	done < <(dpkg-query -W -f='${Package} ${Architecture} ${db:Status-Status}\n' "$@" 2>/dev/null || true)
	for name in "$@"; do
		if [[ -z ${installed[$name]:-} ]]; then
			echo "$name"
		fi
	done
}

policy_rc_created=0
cleanup_policy_rc() {
	if [[ $policy_rc_created -eq 1 ]]; then
		rm -f /usr/sbin/policy-rc.d
		policy_rc_created=0
	fi
}

apt_updated=0
apt_install() {
	local recommends=$1
	shift
	[[ $# -gt 0 ]] || return 0
	if [[ $apt_updated -eq 0 ]]; then
		run apt-get update -q || die "apt-get update failed"
		apt_updated=1
	fi
	local -a flags=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
	if [[ $recommends == no ]]; then
		flags+=(--no-install-recommends)
	fi
	run apt-get install "${flags[@]}" "$@" || die "apt-get install $* failed"
}

# install_apt installs what is missing of the packages of the arrays named $1 (with their recommended
# packages) and $2 (without): APT_ENGINES APT_TOOLS, or the demo's.
install_apt() {
	command -v dpkg-query >/dev/null || die "dpkg-query not found: this script supports Debian bookworm only"
	local -n want_engines=$1 want_tools=$2

	local -a engines tools
	mapfile -t engines < <(missing_packages "${want_engines[@]}")
	mapfile -t tools < <(missing_packages "${want_tools[@]}")

	local pkg
	for pkg in "${want_engines[@]}" "${want_tools[@]}"; do
		if [[ " ${engines[*]} ${tools[*]} " != *" $pkg "* ]]; then
			say present "apt $pkg"
		fi
	done
	if [[ ${#engines[@]} -eq 0 && ${#tools[@]} -eq 0 ]]; then
		return 0
	fi

	export DEBIAN_FRONTEND=noninteractive
	# The tests start their own dockerd and containerd instances: forbid invoke-rc.d from starting the
	# packaged services while installing. An existing policy-rc.d (Docker images ship one) is left alone.
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\n# written by xpu-cdi hack/install-deps.sh, removed when it ends\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		policy_rc_created=1
	fi

	apt_install yes "${engines[@]}"
	apt_install no "${tools[@]}"

	# Packages enable their units at install time even when policy-rc.d stops them from starting;
	# disable them so a reboot does not bring up a system dockerd/containerd beside the tests' own.
	if [[ " ${engines[*]} " == *" docker.io "* ]] && command -v systemctl >/dev/null; then
		systemctl disable docker.service docker.socket containerd.service >/dev/null 2>&1 || true
	fi
	# The exporter's test starts its own Prometheus: no system one on :9090.
	if [[ " ${tools[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
		systemctl disable prometheus.service >/dev/null 2>&1 || true
	fi
	cleanup_policy_rc

	for pkg in "${engines[@]}" "${tools[@]}"; do
		say installed "apt $pkg $(dpkg-query -W -f='${Version}' "$pkg")"
	done
}

# -------------------------------------------------------------------------------------------- arm64

# install_arm64 installs the aarch64 test tools. libc6:arm64 needs dpkg's foreign architecture arm64 and
# the arm64 package lists: both are added only when missing, so a machine that has the packages does not
# pay for an apt-get update.
install_arm64() {
	command -v dpkg-query >/dev/null || die "dpkg-query not found: this script supports Debian bookworm only"
	local -a missing
	mapfile -t missing < <(missing_packages "${APT_ARM64[@]}")
	local pkg
	for pkg in "${APT_ARM64[@]}"; do
		if [[ " ${missing[*]} " != *" $pkg "* ]]; then
			say present "apt $pkg"
		fi
	done
	[[ ${#missing[@]} -gt 0 ]] || return 0
	if ! dpkg --print-foreign-architectures | grep -qx "$ARM64_ARCH"; then
		dpkg --add-architecture "$ARM64_ARCH" || die "dpkg --add-architecture ${ARM64_ARCH} failed"
		say installed "dpkg architecture ${ARM64_ARCH}"
		apt_updated=0 # the arm64 lists are fetched by the next update
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt_install no "${missing[@]}"
	for pkg in "${missing[@]}"; do
		say installed "apt $pkg $(dpkg-query -W -f='${Version}' "$pkg")"
	done
}

# ------------------------------------------------------------------------------------------- trixie

# install_trixie builds the Debian 13 root file system unless ${TRIXIE_ROOT} holds one built from the
# same recipe: the stamp file next to it (${TRIXIE_ROOT}.recipe) records what it was built from. A new
# one is built beside the old one and swapped in only when mmdebstrap succeeded, so a failed build
# leaves nothing half-made in its place.
install_trixie() {
	local recipe stamp=${TRIXIE_ROOT}.recipe
	recipe="mmdebstrap --variant=${TRIXIE_VARIANT} --include=$(IFS=,; echo "${TRIXIE_PACKAGES[*]}") ${TRIXIE_SUITE}"
	if [[ -d $TRIXIE_ROOT && -f $stamp && $(<"$stamp") == "$recipe" ]]; then
		say present "trixie root ${TRIXIE_ROOT}"
		return 0
	fi
	if ! command -v mmdebstrap >/dev/null; then
		export DEBIAN_FRONTEND=noninteractive
		apt_install no mmdebstrap
		say installed "apt mmdebstrap $(dpkg-query -W -f='${Version}' mmdebstrap)"
	fi
	announce "the Debian 13 root ${TRIXIE_ROOT} (mmdebstrap: ${TRIXIE_PACKAGES[*]})" "$ABOUT_TRIXIE"
	local start=$SECONDS new=${TRIXIE_ROOT}.new old=${TRIXIE_ROOT}.old
	mkdir -p "$(dirname "$TRIXIE_ROOT")"
	rm -rf "$new" "$old"
	# shellcheck disable=SC2086 # the recipe is words by design
	run $recipe "$new" || { rm -rf "$new"; die "building the trixie root file system failed: ${recipe} ${new}"; }
	rm -f "$stamp"
	if [[ -e $TRIXIE_ROOT ]]; then
		mv "$TRIXIE_ROOT" "$old"
	fi
	mv "$new" "$TRIXIE_ROOT"
	rm -rf "$old"
	printf '%s\n' "$recipe" >"$stamp.tmp" && mv -f "$stamp.tmp" "$stamp"
	say installed "trixie root ${TRIXIE_ROOT} ($(chroot "$TRIXIE_ROOT" dpkg-query -W -f='${Package} ${Version}, ' podman docker.io containerd runc crun | sed 's/, $//'); $((SECONDS - start)) s)"
}

# ----------------------------------------------------------------------------------------------- go

GO=""
find_go() {
	if command -v go >/dev/null; then
		GO=$(command -v go)
	elif [[ -x /usr/local/go/bin/go ]]; then
		GO=/usr/local/go/bin/go
	else
		die "go not found in PATH or /usr/local/go/bin: install Go 1.26 first"
	fi
}

# module_version prints the version of module $2 that binary $1 was built from, or nothing.
module_version() {
	local bin=$1 module=$2
	[[ -x $bin ]] || return 0
	"$GO" version -m "$bin" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3 }'
}

# go_tool installs packages (all from $module at $version) unless every binary in $bins already
# reports that version; $about is how long their first build takes on two cores ("" when it is under a
# minute), announced before it starts.
go_tool() {
	local module=$1 version=$2 tags=$3 about=$4
	shift 4
	local -a pkgs=("$@")
	local -a stale=()
	local pkg bin have
	for pkg in "${pkgs[@]}"; do
		bin=${TOOLS_BIN}/${pkg##*/}
		have=$(module_version "$bin" "$module")
		if [[ $have == "$version" ]]; then
			say present "go ${pkg##*/} ${version} (${bin})"
		else
			stale+=("$pkg")
		fi
	done
	[[ ${#stale[@]} -gt 0 ]] || return 0

	local -a args=(install -trimpath)
	if [[ -n $tags ]]; then
		args+=(-tags "$tags")
	fi
	for pkg in "${stale[@]}"; do
		args+=("${pkg}@${version}")
	done
	local names=("${stale[@]##*/}")
	announce "${module} ${version} (${names[*]})" "$about"
	local start=$SECONDS
	# Outside any module (cwd /), with -mod flags removed: `go install pkg@version` rejects them.
	(
		cd /
		export GOBIN=$TOOLS_BIN
		export GOFLAGS
		GOFLAGS=$(printf '%s\n' ${GOFLAGS:-} | grep -v '^-mod=' | tr '\n' ' ' || true)
		run "$GO" "${args[@]}"
	) || die "go ${args[*]} failed"
	for pkg in "${stale[@]}"; do
		bin=${TOOLS_BIN}/${pkg##*/}
		have=$(module_version "$bin" "$module")
		[[ $have == "$version" ]] || die "built ${bin} but it reports module version '${have}', want ${version}"
		say installed "go ${pkg##*/} ${version} (${bin}, $((SECONDS - start)) s)"
	done
}

install_go() {
	find_go
	mkdir -p "$TOOLS_BIN"
	go_tool "$CONTAINERD_MODULE" "$CONTAINERD_VERSION" no_btrfs "$ABOUT_CONTAINERD" \
		"${CONTAINERD_MODULE}/cmd/containerd" \
		"${CONTAINERD_MODULE}/cmd/ctr" \
		"${CONTAINERD_MODULE}/cmd/containerd-shim-runc-v2"
	go_tool "$CRICTL_MODULE" "$CRICTL_VERSION" "" "" "${CRICTL_MODULE}/cmd/crictl"
	install_crio
	install_helm
}

install_lint() {
	go_tool "$GOLANGCI_MODULE" "$GOLANGCI_VERSION" "" "$ABOUT_GOLANGCI" "${GOLANGCI_MODULE}/cmd/golangci-lint"
}

install_helm() {
	go_tool "$HELM_MODULE" "$HELM_VERSION" "" "$ABOUT_HELM" "${HELM_MODULE}/cmd/helm"
}

# install_crio builds CRI-O's crio (Go) and pinns (a small static C program) from the module the proxy
# serves, unless both are in ${TOOLS_BIN} at ${CRIO_VERSION}. `go install pkg@version` cannot be used: it
# asks the proxy for the module's version list (for deprecations), which the proxy refuses for CRI-O.
# So crio reports no module version; the check reads `crio --version` (a constant in its source) and a
# stamp file written next to pinns, whose binary carries no version.
install_crio() {
	local crio=${TOOLS_BIN}/crio pinns=${TOOLS_BIN}/pinns stamp=${TOOLS_BIN}/.pinns.version
	local want=${CRIO_VERSION#v} have=""
	if [[ -x $crio ]]; then
		have=$("$crio" --version 2>/dev/null | awk 'NR == 1 && $1 == "crio" && $2 == "version" { print $3 }' || true)
	fi
	if [[ $have == "$want" && -x $pinns && -f $stamp && $(<"$stamp") == "${CRIO_MODULE}@${CRIO_VERSION}" ]]; then
		say present "go crio ${CRIO_VERSION} (${crio})"
		say present "c pinns ${CRIO_VERSION} (${pinns})"
		return 0
	fi
	command -v make >/dev/null && command -v gcc >/dev/null || die "pinns needs make and gcc (apt group)"
	announce "${CRIO_MODULE} ${CRIO_VERSION} (crio, pinns)" "$ABOUT_CRIO"
	local start=$SECONDS src tmp goflags
	goflags=$(printf '%s\n' ${GOFLAGS:-} | grep -v '^-mod=' | tr '\n' ' ' || true)
	src=$(cd / && GOFLAGS=$goflags "$GO" mod download -json "${CRIO_MODULE}@${CRIO_VERSION}" | awk -F'"' '$2 == "Dir" { print $4 }') ||
		die "go mod download ${CRIO_MODULE}@${CRIO_VERSION} failed"
	[[ -f $src/go.mod && -d $src/pinns ]] || die "go mod download ${CRIO_MODULE}@${CRIO_VERSION} gave no module directory ('${src}')"
	# The module cache is read-only: build in a copy.
	tmp=$(mktemp -d /tmp/install-deps-crio.XXXXXX)
	cp -r "$src" "$tmp/cri-o"
	chmod -R u+w "$tmp"
	if ! (cd "$tmp/cri-o" && GOFLAGS=$goflags run "$GO" build -trimpath -ldflags '-s -w' -tags "$CRIO_TAGS" -o bin/crio ./cmd/crio); then
		rm -rf "$tmp"
		die "go build ./cmd/crio (${CRIO_MODULE}@${CRIO_VERSION}) failed"
	fi
	if ! run make -C "$tmp/cri-o/pinns"; then
		rm -rf "$tmp"
		die "make -C pinns (${CRIO_MODULE}@${CRIO_VERSION}) failed"
	fi
	install -m 0755 "$tmp/cri-o/bin/crio" "$crio.tmp" && mv -f "$crio.tmp" "$crio"
	install -m 0755 "$tmp/cri-o/bin/pinns" "$pinns.tmp" && mv -f "$pinns.tmp" "$pinns"
	rm -rf "$tmp"
	printf '%s\n' "${CRIO_MODULE}@${CRIO_VERSION}" >"$stamp.tmp" && mv -f "$stamp.tmp" "$stamp"
	have=$("$crio" --version 2>/dev/null | awk 'NR == 1 { print $3 }' || true)
	[[ $have == "$want" ]] || die "built ${crio} but it reports version '${have}', want ${want}"
	say installed "go crio ${CRIO_VERSION} (${crio}, $((SECONDS - start)) s)"
	say installed "c pinns ${CRIO_VERSION} (${pinns})"
}

# module_dep prints the version of module $2 that binary $1 was built with (main module or dependency).
module_dep() {
	local bin=$1 module=$2
	[[ -x $bin ]] || return 0
	"$GO" version -m "$bin" 2>/dev/null | awk -v m="$module" '($1 == "mod" || $1 == "dep") && $2 == m { print $3 }'
}

# go_flags_no_mod prints GOFLAGS without -mod flags (a throwaway module has no vendor directory).
go_flags_no_mod() {
	printf '%s\n' ${GOFLAGS:-} | grep -v '^-mod=' | tr '\n' ' ' || true
}

# install_kubernetes builds the Kubernetes commands (static, version-stamped) unless each of them in
# ${TOOLS_BIN} reports ${KUBERNETES_MODULE} ${KUBERNETES_VERSION}. One `go build -o DIR` of all five
# packages: they share most of their packages, which are then compiled once.
install_kubernetes() {
	local -a stale=()
	local cmd bin have
	for cmd in "${KUBERNETES_CMDS[@]}"; do
		bin=${TOOLS_BIN}/${cmd}
		have=$(module_dep "$bin" "$KUBERNETES_MODULE")
		if [[ $have == "$KUBERNETES_VERSION" ]]; then
			say present "go ${cmd} ${KUBERNETES_VERSION} (${bin})"
		else
			stale+=("$cmd")
		fi
	done
	[[ ${#stale[@]} -gt 0 ]] || return 0

	announce "Kubernetes ${KUBERNETES_VERSION} (${stale[*]}, one go build)" "$ABOUT_KUBERNETES"
	local start=$SECONDS work minor=${KUBERNETES_VERSION#v1.}
	minor=${minor%%.*}
	work=$(mktemp -d /tmp/xpu-cdi-kubernetes-build.XXXXXX)
	(
		set -euo pipefail
		cd "$work"
		export GOFLAGS GOWORK=off CGO_ENABLED=0
		GOFLAGS=$(go_flags_no_mod)
		printf 'module xpu-cdi.invalid/kubernetes-build\n\ngo 1.26.0\n\nrequire %s %s\n' \
			"$KUBERNETES_MODULE" "$KUBERNETES_VERSION" >go.mod
		local dl gomod info released="" staging=() name
		dl=$("$GO" mod download -json "${KUBERNETES_MODULE}@${KUBERNETES_VERSION}")
		gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$dl")
		info=$(sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p' <<<"$dl")
		# The release's time as the proxy knows it: the build date `kubectl version` shows.
		if [[ -f $info ]]; then
			released=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")
		fi
		[[ -f $gomod ]] || { echo "no go.mod for ${KUBERNETES_MODULE}@${KUBERNETES_VERSION}" >&2; exit 1; }
		mapfile -t staging < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { print $1 }' "$gomod")
		[[ ${#staging[@]} -gt 0 ]] || { echo "no staging replacements in $gomod" >&2; exit 1; }
		for name in "${staging[@]}"; do
			"$GO" mod edit -replace "${name}=${name}@v0.${KUBERNETES_VERSION#v1.}"
		done
		local -a pkgs=() ldflags=(-s -w) vpkg
		for cmd in "${stale[@]}"; do
			pkgs+=("${KUBERNETES_MODULE}/cmd/${cmd}")
		done
		run "$GO" get "${pkgs[@]/%/@${KUBERNETES_VERSION}}"
		# What hack/lib/version.sh stamps: kubectl reads client-go's copy, the rest component-base's.
		for vpkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
			ldflags+=(-X "${vpkg}.gitVersion=${KUBERNETES_VERSION}" -X "${vpkg}.gitMajor=1"
				-X "${vpkg}.gitMinor=${minor}" -X "${vpkg}.gitTreeState=clean"
				-X "${vpkg}.buildDate=${released:-1970-01-01T00:00:00Z}")
		done
		mkdir out
		run "$GO" build -trimpath -o out/ -ldflags "${ldflags[*]}" "${pkgs[@]}"
		for cmd in "${stale[@]}"; do
			install -m 0755 "out/${cmd}" "${TOOLS_BIN}/${cmd}.tmp"
			mv -f "${TOOLS_BIN}/${cmd}.tmp" "${TOOLS_BIN}/${cmd}"
		done
	) || { rm -rf "$work"; die "building ${stale[*]} ${KUBERNETES_VERSION} failed (work dir removed)"; }
	rm -rf "$work"
	for cmd in "${stale[@]}"; do
		bin=${TOOLS_BIN}/${cmd}
		have=$(module_dep "$bin" "$KUBERNETES_MODULE")
		[[ $have == "$KUBERNETES_VERSION" ]] || die "built ${bin} but it reports ${KUBERNETES_MODULE} '${have}', want ${KUBERNETES_VERSION}"
		say installed "go ${cmd} ${KUBERNETES_VERSION} (${bin}, $((SECONDS - start)) s)"
	done
}

# install_etcd builds hack/etcd-embed (its own module, pinned to ${ETCD_MODULE} ${ETCD_VERSION} by its
# go.mod and go.sum) as ${TOOLS_BIN}/etcd unless that binary already reports the version.
install_etcd() {
	local bin=${TOOLS_BIN}/etcd src have
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/etcd-embed" && pwd) || die "hack/etcd-embed not found"
	have=$(module_dep "$bin" "$ETCD_MODULE")
	if [[ $have == "$ETCD_VERSION" ]]; then
		say present "go etcd ${ETCD_VERSION} (${bin}, hack/etcd-embed)"
		return 0
	fi
	announce "etcd ${ETCD_VERSION} (hack/etcd-embed)" "$ABOUT_ETCD"
	local start=$SECONDS
	(
		cd "$src"
		export GOWORK=off CGO_ENABLED=0 GOFLAGS
		GOFLAGS="$(go_flags_no_mod) -mod=readonly"
		run "$GO" build -trimpath -ldflags '-s -w' -o "${bin}.tmp" .
	) || { rm -f "${bin}.tmp"; die "go build hack/etcd-embed failed"; }
	mv -f "${bin}.tmp" "$bin"
	have=$(module_dep "$bin" "$ETCD_MODULE")
	[[ $have == "$ETCD_VERSION" ]] || die "built ${bin} but it reports ${ETCD_MODULE} '${have}', want ${ETCD_VERSION} (hack/etcd-embed/go.mod)"
	say installed "go etcd ${ETCD_VERSION} (${bin}, hack/etcd-embed, $((SECONDS - start)) s)"
}

# The Kubernetes commands and etcd, the longest build, need none of the apt packages (CGO_ENABLED=0, Go is
# installed beforehand): when everything is installed they build in the background while apt, arm64 and
# trixie download and unpack, and the other Go tools (CRI-O's pinns needs gcc from apt) follow those.
kube_pid=""
stop_kube() {
	if [[ -n $kube_pid ]] && kill -0 "$kube_pid" 2>/dev/null; then
		pkill -TERM -P "$kube_pid" 2>/dev/null || true
		kill -TERM "$kube_pid" 2>/dev/null || true
	fi
}
on_exit() {
	cleanup_policy_rc
	stop_kube
}
trap on_exit EXIT
if [[ -z $only ]]; then
	find_go
	mkdir -p "$TOOLS_BIN"
	(
		trap - EXIT
		install_kubernetes
		install_etcd
	) &
	kube_pid=$!
fi

if [[ -z $only || $only == apt ]]; then
	install_apt APT_ENGINES APT_TOOLS
elif [[ $only == demo ]]; then
	install_apt APT_DEMO_ENGINES APT_DEMO_TOOLS
fi
if [[ -z $only || $only == arm64 ]]; then
	install_arm64
fi
if [[ -z $only || $only == trixie ]]; then
	install_trixie
fi
if [[ -n $kube_pid ]]; then
	wait "$kube_pid" || die "building the Kubernetes commands or etcd failed (its error is above)"
	kube_pid=""
fi
case $only in
"") install_go ;;
go)
	install_go
	install_kubernetes
	install_etcd
	;;
kubernetes | kubelet)
	find_go
	mkdir -p "$TOOLS_BIN"
	install_kubernetes
	install_etcd
	;;
helm)
	find_go
	mkdir -p "$TOOLS_BIN"
	install_helm
	;;
lint)
	find_go
	mkdir -p "$TOOLS_BIN"
	install_lint
	;;
esac
