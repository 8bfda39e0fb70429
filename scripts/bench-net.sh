#!/bin/bash
# bench-net.sh [ROOTFS] - the --net proxy benchmark (docs/benchmarks.md, "Network").
#   1. a ${MB:-200} MB download from a local HTTP server (tests/net-data/serve.py on
#      127.0.0.1) directly on the host, then through the proxy from inside a
#      sandbox, same client, in one run: throughput ratio (goal >= 0.8);
#   2. the memory the proxy adds per sandbox: RSS of the `lis proxyd` daemon
#      serving 1 and then ${N:-100} idle persistent --net proxy sandboxes (goal <= 0.1 MB).
# ROOTFS: a tree with curl (the Debian fixture); default $LIS_TEST_DEBIAN, else a
# busybox tree (busybox wget on both sides). Run as a user that can create
# sandboxes; uses private run/data dirs under /var/tmp.
set -eu
cd "$(dirname "$0")/.."
B=${B:-build}
LIS=$PWD/$B/lis
MB=${MB:-200}
N=${N:-100}
RUNS=${RUNS:-5}
[ -x "$LIS" ] || { echo "bench-net: build first (make B=$B)" >&2; exit 1; }
work=$(mktemp -d /var/tmp/lis-bench-net.XXXXXX)
chmod 755 "$work"
export XDG_RUNTIME_DIR="$work/run" XDG_DATA_HOME="$work/data"
mkdir -p "$XDG_RUNTIME_DIR" "$XDG_DATA_HOME"
chmod 700 "$XDG_RUNTIME_DIR"
srv=
cleanup() {
    "$LIS" sandbox rm --all >/dev/null 2>&1 || true
    [ -n "$srv" ] && kill "$srv" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

rootfs=${1:-${LIS_TEST_DEBIAN:-}}
if [ -z "$rootfs" ] || [ ! -d "$rootfs" ]; then
    bash scripts/make-test-rootfs.sh busybox "$work/busybox"
    rootfs=$work/busybox
fi

python3 tests/net-data/serve.py "$work/www" --big "$MB" > "$work/port" &
srv=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
url=http://127.0.0.1:$port/big.bin

# The same client on both sides: curl when the rootfs has it, else busybox wget.
if [ -x "$rootfs/usr/bin/curl" ] && command -v curl >/dev/null; then
    client=curl
    get='t0=$(date +%s%N); curl -s -o /dev/null '"$url"'; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 ))'
else
    # busybox date has no %N: /proc/uptime (10 ms resolution; use MB=1000 for precision)
    client="busybox wget"
    get='t0=$(cut -d" " -f1 /proc/uptime); busybox wget -q -O /dev/null '"$url"'; t1=$(cut -d" " -f1 /proc/uptime); awk -v a=$t0 -v b=$t1 "BEGIN{print int((b-a)*1e6)}"'
fi
best() { sort -n | head -n1; }

direct=$(for _ in $(seq "$RUNS"); do sh -c "$get"; done | best)
proxied=$("$LIS" sandbox run --rootfs "$rootfs" --net proxy --allow-host-network \
          -e no_proxy= -e NO_PROXY= -- sh -c "for i in \$(seq $RUNS); do $get; done" 2>/dev/null | best)
mbps() { awk -v us="$1" -v mb="$MB" 'BEGIN { printf "%.0f", mb * 1048576 / (us / 1e6) / 1e6 }'; }
echo "download of $MB MB with $client, best of $RUNS:"
echo "  direct on the host : $(awk -v us="$direct" 'BEGIN{printf "%.3f", us/1e6}') s  $(mbps "$direct") MB/s"
echo "  through the proxy  : $(awk -v us="$proxied" 'BEGIN{printf "%.3f", us/1e6}') s  $(mbps "$proxied") MB/s"
echo "  ratio (proxy/direct throughput): $(awk -v a="$direct" -v b="$proxied" 'BEGIN{printf "%.2f", a/b}')  (goal >= 0.8)"

# Memory per sandbox: the daemon's RSS with 1, then N idle proxy sandboxes.
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
"$LIS" sandbox create --rootfs "$rootfs" --net proxy --name bn-0 >/dev/null 2>&1
pid=$(head -n1 "$XDG_RUNTIME_DIR/lis/proxyd.lock")
r1=$(rss "$pid")
for i in $(seq 1 $((N - 1))); do
    "$LIS" sandbox create --rootfs "$rootfs" --net proxy --name "bn-$i" >/dev/null 2>&1
done
rn=$(rss "$pid")
echo "proxy daemon RSS: $r1 kB with 1 sandbox, $rn kB with $N sandboxes:" \
     "$(awk -v a="$r1" -v b="$rn" -v n="$N" 'BEGIN{printf "%.1f kB (%.4f MB)", (b-a)/(n-1), (b-a)/(n-1)/1024}')" \
     "per sandbox (goal <= 0.1 MB)"
