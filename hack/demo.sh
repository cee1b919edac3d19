#!/usr/bin/env bash
# demo.sh: what xpu-cdi does, on a machine without any XPU.
#
# Builds the three programs it runs in one go build (xpu-cdi, the hook the
# spec names, and the fake host builder; one build compiles the packages
# they share once and with the same flags), creates a fake 8-device P800
# Kunlun host as P800 hosts are today (the p800-sysfs shape: driver and XRE
# 5.x, char nodes 195:N and xpuctrl 195:255, /proc/kunlun, no /proc/xpu or
# /sys/class/xpu, the nodes' PCI functions found through /sys/dev/char, XRE 5
# libraries in /usr/local/xpu/so that are real ELF files, a dynamically
# linked xpu-smi) under a temporary directory, runs `xpu-cdi info` and
# `xpu-cdi generate` on it, prints the spec's summary (`xpu-cdi validate
# --summary`; XPU_DEMO_YAML=1 prints the whole YAML too) and, when Podman is
# available, starts a container (busybox plus the host's glibc, no image
# pulled) with the XPU named by its PCI address from that spec and shows
# /dev/xpu0, its XPU_CDI_DEVICE_0 and xpu-smi inside it. Each step's title
# says how long the demo has run. Everything is removed at the end; the
# spec uses the kind baidu.com/xpu-demo so a real baidu.com/xpu spec is
# never touched.
#
# Its packages (hack/install-deps.sh --only demo) install while the three
# build. The demo runs no kubelet, so xpu-cdi is built without its
# PodResources client (make demo-bin: -tags no_podresources), which would be
# a third of what a first build compiles (docs/development.md, "Time
# budget").
set -euo pipefail

cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (the demo host has real device nodes, made with mknod)" >&2; exit 1; }

work=$(mktemp -d /tmp/xpu-cdi-demo.XXXXXX)
spec=/var/run/cdi/baidu.com-xpu-demo.yaml
install_pid=
cleanup() {
	# An install under way is let finish: a dpkg stopped halfway leaves
	# the machine's packages broken.
	if [ -n "$install_pid" ]; then
		wait "$install_pid" 2>/dev/null || true
	fi
	rm -f "$spec"
	rm -rf "$work"
}
trap cleanup EXIT

# The demo's packages (Podman, runc, busybox, gcc) install while the
# binaries build: the build needs none of them, and on a fresh machine
# apt's download and unpacking then cost no time of their own.
if [ "${XPU_DEMO_NO_INSTALL:-}" != 1 ]; then
	hack/install-deps.sh --quiet --only demo >"$work/install.log" 2>&1 &
	install_pid=$!
fi

# step prints a step's title after the seconds the demo has run so far.
start=$EPOCHREALTIME
step() {
	local now=$EPOCHREALTIME
	local ms=$(((${now//[.,]/} - ${start//[.,]/}) / 1000))
	printf '\n\033[1m==> [%d.%01d s] %s\033[0m\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*"
}

step "make demo-bin (xpu-cdi, xpu-runtime-hook, xpu-fakehost: one go build; no kubelet here, so xpu-cdi without its PodResources client)"
make --no-print-directory demo-bin BINDIR="$work/bin"
xpu_cdi="$work/bin/xpu-cdi"
"$xpu_cdi" --version

if [ -n "$install_pid" ]; then
	rc=0
	wait "$install_pid" || rc=$?
	install_pid=
	cat "$work/install.log"
	[ "$rc" -eq 0 ] || { echo "demo: installing its packages failed: hack/install-deps.sh --only demo exited $rc" >&2; exit 1; }
fi

step "a fake Kunlun host: 8 x P800, driver and XRE 5.x, under $work/host"
"$work/bin/xpu-fakehost" --shape p800-sysfs --root "$work/host"
ls -l "$work/host/dev"

step "xpu-cdi info --dev-root $work/host --driver-root $work/host"
"$xpu_cdi" info --dev-root "$work/host" --driver-root "$work/host" | tee "$work/info"
# /dev/xpu0's PCI address: the spec names each XPU by index and by address.
bdf=$(awk '$1 == "0" && $2 == "/dev/xpu0" { print $4 }' "$work/info")
[[ $bdf =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]] || { echo "demo: no PCI address for /dev/xpu0 in xpu-cdi info" >&2; exit 1; }

step "xpu-cdi generate --class xpu-demo --output $spec"
"$xpu_cdi" generate --dev-root "$work/host" --driver-root "$work/host" --class xpu-demo \
	--hook-path "$work/bin/xpu-runtime-hook" --output "$spec"
if [ "${XPU_DEMO_YAML:-}" = 1 ]; then
	cat "$spec"
fi

step "xpu-cdi validate --summary $spec (the whole YAML: XPU_DEMO_YAML=1 make demo)"
"$xpu_cdi" validate --summary "$spec"

step "xpu-cdi list"
"$xpu_cdi" list | grep xpu-demo | head -20

if ! command -v podman >/dev/null; then
	echo "demo: podman not installed; install it (hack/install-deps.sh --only demo) to see a container use the spec"
	exit 0
fi

# Podman as root on this machine kind: runc, cgroupfs, no journald.
cat >"$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
export CONTAINERS_CONF="$work/containers.conf"
rootfs="$work/rootfs"
mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev"
cp /bin/busybox "$rootfs/bin/busybox"
for applet in sh ls cat env grep; do ln -s busybox "$rootfs/bin/$applet"; done
echo "root:x:0:0:root:/root:/bin/sh" >"$rootfs/etc/passwd"
# XRE 5's xpu-smi is a glibc program: the image gets the host's loader and
# libc (and no ld.so.cache: the spec's hook writes one for the XRE folders).
for lib in /lib64/ld-linux-x86-64.so.2 /lib/x86_64-linux-gnu/libc.so.6; do
	if [ -e "$lib" ]; then
		mkdir -p "$rootfs$(dirname "$lib")"
		cp -L "$lib" "$rootfs$lib"
	fi
done

step "podman run --device baidu.com/xpu-demo=$bdf (busybox + glibc rootfs) ls -l /dev/xpu* ; xpu-smi"
podman --root "$work/storage" --runroot "$work/run" run --rm --network none --device "baidu.com/xpu-demo=$bdf" \
	--rootfs "$rootfs" /bin/sh -c 'ls -l /dev/xpu*; env | grep ^XPU_; ls /usr/local/xpu/so; xpu-smi'
podman --root "$work/storage" --runroot "$work/run" system reset --force >/dev/null 2>&1 || true

step "done: the container saw /dev/xpu0 and /dev/xpuctrl only"
