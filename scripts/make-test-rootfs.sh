#!/bin/sh
# Builds the root filesystems the tests use.
#   make-test-rootfs.sh busybox DIR   a busybox-static tree (seconds, no network)
#   make-test-rootfs.sh debian DIR    a Debian minbase from the apt mirror (debootstrap; root)
# The Debian tree is built once and cached (LIS_TEST_CACHE, default /var/cache/lis-test).
set -eu
kind=$1 dir=$2
case "$kind" in
busybox)
    bb=$(command -v busybox || true)
    [ -x /bin/busybox ] && bb=/bin/busybox
    if [ -z "$bb" ] || ! "$bb" --list >/dev/null 2>&1; then
        echo "make-test-rootfs: busybox-static is not installed (scripts/deps.sh)" >&2; exit 1
    fi
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp/bin" "$dir.tmp/proc" "$dir.tmp/dev" "$dir.tmp/sys" "$dir.tmp/tmp" \
             "$dir.tmp/etc" "$dir.tmp/root" "$dir.tmp/usr/bin" "$dir.tmp/testbed"
    cp "$bb" "$dir.tmp/bin/busybox"
    for a in $("$bb" --list); do
        [ "$a" = busybox ] || ln -sf busybox "$dir.tmp/bin/$a"
    done
    echo 'root:x:0:0:root:/root:/bin/sh' > "$dir.tmp/etc/passwd"
    echo 'root:x:0:' > "$dir.tmp/etc/group"
    echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >> "$dir.tmp/etc/passwd"
    echo 'lower file' > "$dir.tmp/etc/lower.txt"
    chmod 1777 "$dir.tmp/tmp"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    ;;
debian)
    cache=${LIS_TEST_CACHE:-/var/cache/lis-test}/debian-bookworm-minbase
    # one builder/copier at a time: parallel test runs share the cache
    mkdir -p "$(dirname "$cache")" 2>/dev/null || true
    if [ -w "$(dirname "$cache")" ]; then
        exec 9>"$(dirname "$cache")/.lock"
        flock 9
    fi
    # python3 (full, for http/urllib), pip, curl and wget serve the agent and --net proxy
    # tests; a cache made with another package list is rebuilt (as root)
    pkgs=python3,python3-pip,procps,curl,wget
    if [ ! -x "$cache/bin/bash" ] ||
       { [ "$(id -u)" -eq 0 ] && [ "$(cat "$cache/.lis-fixture" 2>/dev/null)" != "$pkgs" ]; }; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "make-test-rootfs: no cached Debian tree at $cache; run once as root:" >&2
            echo "  sudo $0 debian $dir" >&2
            exit 1
        fi
        mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
                 sed -nE 's/^URIs:[[:space:]]*([^ ]+).*/\1/p; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^ ]+).*/\2/p' |
                 grep -v security | head -n1)
        mirror=${mirror:-http://deb.debian.org/debian}
        rm -rf "$cache.tmp"
        debootstrap --variant=minbase --include="$pkgs" bookworm "$cache.tmp" "$mirror" >"$cache.log" 2>&1 || {
            echo "make-test-rootfs: debootstrap failed, see $cache.log" >&2; exit 1; }
        rm -rf "$cache.tmp/var/cache/apt/archives/"*.deb "$cache"
        echo "$pkgs" > "$cache.tmp/.lis-fixture"
        mv "$cache.tmp" "$cache"
    fi
    rm -rf "$dir"
    cp -a "$cache" "$dir"
    ;;
*)
    echo "usage: $0 busybox|debian DIR" >&2; exit 2 ;;
esac
