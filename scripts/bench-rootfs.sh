#!/bin/bash
# bench-rootfs.sh - `lis rootfs import` of a Debian rootfs tarball vs `tar -xzf`
# of the same file, in the same run, same filesystem, warm page cache.
# Prints both medians and the ratio import/tar (goal <= 1.0).
#   TARBALL=path.tar.gz   use this tarball (default: built from the Debian
#                         test fixture, scripts/make-test-rootfs.sh debian)
#   ROUNDS=5              rounds (alternating tar / import)
#   LIS=build/lis         the lis binary
#   TMPDIR=/var/tmp       where both extract (same filesystem for both; /dev/shm
#                         takes the disk out and measures CPU + syscalls)
set -eu
cd "$(dirname "$0")/.."
LIS=${LIS:-${B:-build}/lis}
ROUNDS=${ROUNDS:-5}
work=$(mktemp -d "${TMPDIR:-/var/tmp}/lis-bench-rootfs.XXXXXX")
trap 'chmod -R u+rwX "$work" 2>/dev/null; rm -rf "$work"' EXIT
tarball=${TARBALL:-}
if [ -z "$tarball" ]; then
    deb=${LIS_TEST_DEBIAN:-}
    if [ -z "$deb" ]; then
        deb=$work/debian
        bash scripts/make-test-rootfs.sh debian "$deb" >/dev/null || {
            echo "bench-rootfs: no Debian tree (run once as root: scripts/make-test-rootfs.sh debian DIR)" >&2
            exit 1; }
    fi
    tarball=$work/debian.tar.gz
    tar -C "$deb" --numeric-owner -czf "$tarball" .
    [ "$deb" = "$work/debian" ] && rm -rf "$deb"
fi
# ownership is collapsed to the caller by lis; make tar do the same when root
owner=""
[ "$(id -u)" -eq 0 ] && owner=--no-same-owner
export XDG_DATA_HOME=$work/xdg
now() { date +%s.%N; }
tt=() lt=()
for i in $(seq "$ROUNDS"); do
    mkdir "$work/x"
    sync
    s=$(now); tar -C "$work/x" $owner -xzf "$tarball"; e=$(now)
    tt+=("$(awk "BEGIN {print $e - $s}")")
    chmod -R u+rwX "$work/x"; rm -rf "$work/x"
    sync
    s=$(now); "$LIS" rootfs import -q "$tarball" --name bench:1 >/dev/null; e=$(now)
    lt+=("$(awk "BEGIN {print $e - $s}")")
    "$LIS" rootfs rm bench:1 >/dev/null
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
tm=$(median "${tt[@]}") lm=$(median "${lt[@]}")
size=$(du -m "$tarball" | cut -f1)
printf 'tarball      %s (%s MB)\n' "$tarball" "$size"
printf 'tar -xzf     median %.3f s  (%s)\n' "$tm" "$(printf '%.2f ' "${tt[@]}")"
printf 'lis import   median %.3f s  (%s)\n' "$lm" "$(printf '%.2f ' "${lt[@]}")"
printf "ratio        %.2f (lis import / tar -xzf; goal <= 1.0)\n" "$(awk "BEGIN {print $lm / $tm}")"
