# image.sh - sourced by the RL benchmarks: bench_image LIS TAG TMP makes sure lis's store (of
# the current XDG_DATA_HOME) has TAG, importing the Debian test fixture (LIS_BENCH_ROOTFS, made
# by scripts/make-test-rootfs.sh when missing) under that name; TMP holds the archive meanwhile.
bench_image() {
    local lis=$1 tag=$2 tmp=$3 r=${LIS_BENCH_ROOTFS:-/var/tmp/lis-bench-debian}
    "$lis" rootfs inspect "$tag" >/dev/null 2>&1 && return 0
    [ -d "$r/usr/bin" ] || bash scripts/make-test-rootfs.sh debian "$r" >/dev/null || return 1
    tar -C "$r" -cf "$tmp/img.tar" . && "$lis" rootfs import "$tmp/img.tar" --name "$tag" -q \
        >/dev/null || { echo "importing $r as $tag failed" >&2; rm -f "$tmp/img.tar"; return 1; }
    rm -f "$tmp/img.tar"
}

# bench_store_clear LIS: every image of the current XDG_DATA_HOME's store removed (its files
# belong to the user's subordinate ids: lis removes them, rm -rf cannot)
bench_store_clear() {
    local r
    for r in $("$1" rootfs ls --json 2>/dev/null | grep -o '"ref":"[^"]*"' | cut -d'"' -f4); do
        "$1" rootfs rm "$r" --force >/dev/null 2>&1
    done
    "$1" rootfs gc >/dev/null 2>&1
}
