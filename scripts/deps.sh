#!/bin/sh
# Installs the Debian/Ubuntu packages lis needs, after checking which are missing.
#   scripts/deps.sh          what building and running lis needs
#   scripts/deps.sh --test   and what only the test suites and benchmarks need (.ci/run)
# Nothing missing: it says so and succeeds, as any user (no root, no sudo). Something
# missing: as root it runs apt-get for that; as another user it runs itself again
# through sudo; where there is no sudo it prints the command to run as root and fails.
set -eu
# build: the compiler and the -dev packages of the Makefile's pkg-config libraries
BUILD="build-essential pkg-config libc6-dev libseccomp-dev libcurl4-openssl-dev libssl-dev \
 libcjson-dev libarchive-dev libyaml-dev libmicrohttpd-dev libgnutls28-dev"
# run: uidmap (newuidmap/newgidmap: full id maps), the default image's build
# (scripts/make-rootfs.sh: mmdebstrap rootless, debootstrap as root, zstd, curl, runuser
# from util-linux), python3 for a task's reward.py, ca-certificates for https endpoints
RUN="uidmap mmdebstrap debootstrap zstd curl util-linux python3 ca-certificates"
# Test-only: criterion and the fixtures (busybox-static; procps, iproute2, xz-utils, wget in
# the suites), the benchmarks' peers (bubblewrap, hyperfine), chromium (tests/test_batch_report.c
# opens `lis report` output in headless Chromium), clang-format-14 (make format-check), a real
# registry and OCI tools, the cgroup v2 VM (qemu, cpio, kmod), apparmor_parser to check
# scripts/apparmor/lis, clang with libFuzzer for `make fuzz` (libclang-rt-14-dev is Debian
# 12's; clang-N wants libclang-rt-N-dev). python3-docker and docker.io: the real clients of
# `lis serve`'s suite (the docker CLI only as a client: tests never start dockerd), with
# docker-compose (1.29) for its compose checks (tests/test_serve_compose.c);
# python3-pytest: the Python client's suite tests/python (tests/test_python_client.c);
# python3-venv, -setuptools, -wheel: its offline venv install (python/README.md). A
# single-node Slurm with munge for scripts/slurm/ci-test.sh (its daemons are started by hand,
# never by the packages).
TEST="libcriterion-dev busybox-static procps iproute2 xz-utils tar wget bubblewrap hyperfine \
 chromium clang-format-14 python3-docker python3-pytest python3-venv python3-setuptools \
 python3-wheel docker.io docker-compose docker-registry umoci skopeo \
 qemu-system-x86 cpio kmod apparmor clang libclang-rt-14-dev slurmctld slurmd slurm-client munge"
want="$BUILD $RUN"
case "${1:-}" in
  --test) want="$want $TEST" ;;
  "") ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "deps.sh: unknown option '$1' (usage: scripts/deps.sh [--test])" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "deps.sh: one option at most (usage: scripts/deps.sh [--test])" >&2; exit 2; }

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps.sh: this is not a Debian/Ubuntu system (no dpkg-query); install the equivalents of:" >&2
  # shellcheck disable=SC2086,SC2116
  echo "  $(echo $want)" >&2
  exit 1
fi
missing=""
for p in $want; do
  case "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)" in
    ii*) ;;
    *) missing="$missing $p" ;;
  esac
done
# shellcheck disable=SC2086,SC2116
n=$(echo $want | wc -w)
if [ -z "$missing" ]; then
  echo "deps.sh: the $n packages lis needs${1:+ for $1} are installed"
  exit 0
fi
# shellcheck disable=SC2086,SC2116
missing=$(echo $missing) # one space between names
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    echo "deps.sh: missing: $missing; installing them as root through sudo" >&2
    exec sudo sh "$0" "$@"
  fi
  echo "deps.sh: missing: $missing" >&2
  echo "installing packages needs root, and sudo is not installed; as root run:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends $missing" >&2
  exit 1
fi
echo "deps.sh: installing $missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q -o DPkg::Lock::Timeout=300
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 $missing
