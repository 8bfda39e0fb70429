#!/bin/bash
# One episode cannot slow another (issue 29, docs/benchmarks.md): a neighbour's exec
# latency (p99 of N one-exec commands, each two notifications of the shared hub) with no
# attacker, then while another episode on the same hub holds 200,000 files in its writable
# layer and makes 2,000 more every step (its scans running back to back); prints the ratio.
#   scripts/bench-scan.sh [N]     (as root it runs as $LIS_BENCH_USER, default lis-bench)
set -eu
cd "$(dirname "$0")/.."
make -j2 build/tests/bench_monitor build/tests/monitor_probe build/lis-init >/dev/null
work=${LIS_BENCH_WORK:-/var/tmp/lis-bench-scan}
rm -rf "$work" && mkdir -p "$work"
bash scripts/make-test-rootfs.sh busybox "$work/busybox" >/dev/null
cp build/tests/bench_monitor build/tests/monitor_probe build/lis-init "$work/"
echo "before: $(uptime)"
args=("$work/busybox" "$work/monitor_probe" "${1:-300}" neighbour)
if [ "$(id -u)" -eq 0 ]; then
    user=${LIS_BENCH_USER:-lis-bench}
    id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
    chown -R "$user:$user" "$work"
    runuser -u "$user" -- env HOME="$(getent passwd "$user" | cut -d: -f6)" XDG_RUNTIME_DIR= \
        LIS_INIT="$work/lis-init" "$work/bench_monitor" "${args[@]}"
else
    LIS_INIT="$work/lis-init" "$work/bench_monitor" "${args[@]}"
fi
rm -rf "$work" 2>/dev/null || true
echo "after:  $(uptime)"
