#!/bin/sh
# Install the Debian/Ubuntu packages lis needs to build, test and benchmark.
# As root: installs them with apt-get. Otherwise: prints the exact command to run.
set -eu
PKGS="build-essential pkg-config libc6-dev \
 libseccomp-dev libcap-dev libcurl4-openssl-dev libssl-dev libcjson-dev libarchive-dev libyaml-dev \
 libcriterion-dev \
 busybox-static debootstrap mmdebstrap uidmap bubblewrap hyperfine util-linux iproute2 procps \
 zstd xz-utils tar curl wget python3 ca-certificates"
# Test-only extras: a real registry and OCI tools, the cgroup v2 VM, and clang with
# libFuzzer for `make fuzz` (libclang-rt-14-dev is Debian 12's; clang-N wants libclang-rt-N-dev).
EXTRA="docker-registry umoci skopeo qemu-system-x86 cpio kmod clang libclang-rt-14-dev"
case "${1:-}" in
  --minimal) EXTRA="" ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  echo "run as root: apt-get update && apt-get install -y --no-install-recommends $PKGS $EXTRA"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q -o DPkg::Lock::Timeout=300
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 $PKGS $EXTRA
