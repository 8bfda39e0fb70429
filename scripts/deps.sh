#!/bin/sh
# Installs the Debian/Ubuntu packages lis needs to build, test and benchmark.
#   scripts/deps.sh [--minimal]     (--minimal: without the test-only extras)
# As root it runs apt-get; as another user it runs itself again through sudo;
# where there is no sudo it prints the command to run as root and fails.
set -eu
PKGS="build-essential pkg-config libc6-dev \
 libseccomp-dev libcap-dev libcurl4-openssl-dev libssl-dev libcjson-dev libarchive-dev libyaml-dev \
 libcriterion-dev libmicrohttpd-dev libgnutls28-dev \
 busybox-static debootstrap mmdebstrap uidmap bubblewrap hyperfine util-linux iproute2 procps \
 zstd xz-utils tar curl wget python3 ca-certificates chromium"
# chromium: tests/test_batch_report.c opens `lis report` output in headless Chromium
# Test-only extras: a real registry and OCI tools, the cgroup v2 VM, apparmor_parser to
# check scripts/apparmor/lis, and clang with libFuzzer for `make fuzz` (libclang-rt-14-dev
# is Debian 12's; clang-N wants libclang-rt-N-dev). python3-docker and docker.io: the
# real clients of `lis serve`'s suite (the docker CLI only as a client: tests never start dockerd);
# python3-pytest: the Python client's suite tests/python (tests/test_python_client.c);
# python3-venv, -setuptools, -wheel: its offline venv install (python/README.md).
# A single-node Slurm with munge for scripts/slurm/ci-test.sh (its daemons are started by hand,
# never by the packages).
EXTRA="python3-docker python3-pytest python3-venv python3-setuptools python3-wheel docker.io docker-registry umoci skopeo qemu-system-x86 cpio kmod apparmor \
 clang libclang-rt-14-dev clang-format-14 slurmctld slurmd slurm-client munge"
case "${1:-}" in
  --minimal) EXTRA="" ;;
  "") ;;
  *) echo "deps.sh: unknown option '$1' (usage: scripts/deps.sh [--minimal])" >&2; exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    echo "deps.sh: installing the packages as root through sudo" >&2
    exec sudo sh "$0" "$@"
  fi
  # shellcheck disable=SC2086,SC2116
  all=$(echo $PKGS $EXTRA) # one space between names
  echo "deps.sh: installing packages needs root, and sudo is not installed; as root run:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends $all" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q -o DPkg::Lock::Timeout=300
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 $PKGS $EXTRA
