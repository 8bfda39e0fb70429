#!/bin/bash
# Runs lis's cgroup v2 suite (BUILD/tests/vm_cgroup, a criterion binary) inside the test VM as an
# unprivileged uid that owns a delegated cgroup v2 subtree, like systemd's user@.service.
#
#   tests/vm/run-suite.sh [-B BUILD_DIR] [-t SECS] [-u UID] [-- CRITERION_ARGS...]
#
# Needs tests/vm/build-initramfs.sh run once (kernel + initramfs in $VMTEST_WORK, default
# /var/tmp/vmtest) and `make tests` (BUILD_DIR defaults to ./build). The binaries and the fixture
# script go into a per-run transfer directory that the VM mounts writable (run-vm.sh -o); the guest
# copies them to its /dev/shm and builds the busybox fixture there (a tmpfs, so the sandbox's
# overlay lower layer is not 9p). Exit status: the suite's (124 timeout, 125 no result).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
B=$TOP/build TMO=600 VUID=1000
while getopts "B:t:u:" o; do
    case $o in
        B) B=$(realpath "$OPTARG") ;; t) TMO=$OPTARG ;; u) VUID=$OPTARG ;;
        *) sed -n '2,12p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift
for f in "$B/lis" "$B/lis-init" "$B/tests/vm_cgroup" "$B/tests/test_bombs" "$B/tests/sysprobe"; do
    [ -x "$f" ] || { echo "run-suite: $f missing (make B=$B tests)" >&2; exit 2; }
done
OUT=$(mktemp -d /tmp/lis-vm.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
mkdir -p "$OUT/build/tests"
cp "$B/lis" "$B/lis-init" "$B/liblis-rootfs.so" "$OUT/build/"
cp "$B/tests/vm_cgroup" "$B/tests/test_bombs" "$B/tests/sysprobe" "$OUT/build/tests/"
cp "$HERE/guest-suite.sh" "$OUT/"
# the busybox fixture, built here (~400 symlinks cost ~30 s of forks under TCG) and unpacked there
sh "$TOP/scripts/make-test-rootfs.sh" busybox "$OUT/busybox" >/dev/null || exit 2
tar -C "$OUT" -cf "$OUT/busybox.tar" busybox && rm -rf "$OUT/busybox"
chmod -R a+rX "$OUT"
bash "$HERE/run-vm.sh" ${VMTEST_TS:+-T} -A loglevel=3 -t "$TMO" -u "$VUID" -o "$OUT" -- /bin/sh "$OUT/guest-suite.sh" "$@"
