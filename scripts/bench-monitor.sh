#!/bin/bash
# The cost of monitor/ (docs/monitoring.md, docs/benchmarks.md): one exec notification
# against the same execs without the monitor, and one step's file diff of 100 changed
# files against a step that changed none; both measured in the same run. The host's load
# (uptime) is printed before and after: on a busy host run it again at a quieter moment.
# With `neighbour` (issue 29): one episode cannot slow another: a neighbour's exec latency
# (p99 of N one-exec commands, each two notifications of the shared hub) with no attacker
# and while another episode on the same hub holds 200,000 files in its writable layer and
# makes 2,000 more every step, in interleaved blocks; it prints the ratio of the p99s.
#   scripts/bench-monitor.sh [N_EXECS] [neighbour]
#                                  (as root it runs as $LIS_BENCH_USER, default lis-bench)
set -eu
cd "$(dirname "$0")/.."
make -j2 build/tests/bench_monitor build/tests/monitor_probe build/lis-init >/dev/null
work=${LIS_BENCH_WORK:-/var/tmp/lis-bench-monitor}
rm -rf "$work" && mkdir -p "$work"
bash scripts/make-test-rootfs.sh busybox "$work/busybox" >/dev/null
cp build/tests/bench_monitor build/tests/monitor_probe build/lis-init "$work/"
echo "before: $(uptime)"
if [ "$(id -u)" -eq 0 ]; then
    user=${LIS_BENCH_USER:-lis-bench}
    id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
    chown -R "$user:$user" "$work"
    runuser -u "$user" -- env HOME="$(getent passwd "$user" | cut -d: -f6)" XDG_RUNTIME_DIR= \
        LIS_INIT="$work/lis-init" "$work/bench_monitor" "$work/busybox" "$work/monitor_probe" "${1:-1000}" ${2:+"$2"}
else
    LIS_INIT="$work/lis-init" "$work/bench_monitor" "$work/busybox" "$work/monitor_probe" "${1:-1000}" ${2:+"$2"}
fi
rm -rf "$work" 2>/dev/null || true
echo "after:  $(uptime)"
