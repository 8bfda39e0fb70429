#!/bin/bash
# Where a sandbox's set-up goes (issue 24): tests/bench_setup sets up N sandboxes the way
# `lis batch` does (the sandbox with the egress proxy, the task's directories, `git init`,
# the tool environment, an input file), by 1, 2, 4 and 8 creators, twice: each sandbox
# exec'ing `mkdir -p` and `git init` itself (lis before issue 24), and every sandbox starting
# on a template snapshot made once (lis now). Beside them, in the same run: bwrap making N
# bare sandboxes (/bin/true) with as many at once, and the machine's fork+exec of /bin/true,
# so that runs on different machines can be compared. docs/benchmarks.md has runs.
#
# Run as root after `make tests` (everything runs rootless as $LIS_BENCH_USER).
# Env: N (default 512), CREATORS (default "1 2 4 8"), NET (proxy | none, default proxy),
#      ROOTFS (default: the Debian test fixture with the host's git as a layer on top),
#      LIS_BENCH_USER (default lis-test), BENCH_WORK (default /var/tmp/lis-bench-setup),
#      B (the build dir measured, default build).
set -u
cd "$(dirname "$0")/.."
user=${LIS_BENCH_USER:-lis-test}
work=${BENCH_WORK:-/var/tmp/lis-bench-setup}
B=${B:-build}
N=${N:-512}
[ "$(id -u)" -eq 0 ] || { echo "bench-setup: run as root (it runs the sandboxes as $user)"; exit 1; }
[ -x "$B/tests/bench_setup" ] || { echo "bench-setup: $B/tests/bench_setup missing (make tests)"; exit 1; }
command -v bwrap >/dev/null || echo "bench-setup: note: no bwrap here, its rows are skipped"
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
rm -rf "$work"; mkdir -p "$work"; chmod 755 "$work"
cp -a "$B" "$work/build"; chmod -R a+rX "$work/build"
R=${ROOTFS:-}
if [ -z "$R" ]; then
    bash scripts/make-test-rootfs.sh debian "$work/debian" >/dev/null || exit 1
    R=$work/debian
    if command -v git >/dev/null; then # the image's own git: the host's, Debian's too
        mkdir -p "$work/git/usr/bin" "$work/git/usr/share/git-core"
        cp "$(command -v git)" "$work/git/usr/bin/git"
        [ -d /usr/share/git-core/templates ] && cp -a /usr/share/git-core/templates "$work/git/usr/share/git-core/"
        R=$work/git:$work/debian
    fi
fi
chown -R "$user:$user" "$work"
home=$(getent passwd "$user" | cut -d: -f6)
echo "== machine: $(nproc) cores, $(uname -r), $(date -u '+%F %H:%M'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $N sandboxes, --net ${NET:-proxy}, rootfs $R, creators ${CREATORS:-1 2 4 8}, build $B"
runuser -u "$user" -- env HOME="$home" XDG_RUNTIME_DIR= XDG_DATA_HOME="$work/data" \
    CREATORS="${CREATORS:-1 2 4 8}" "$work/build/tests/bench_setup" "$R" "$N" "${NET:-proxy}" \
    | tee "$work/out.txt"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/out.txt" "$N" <<'EOF'
import re, sys
rows, n = {}, int(sys.argv[2])
for l in open(sys.argv[1]):
    m = re.match(r"(\w+) k=(\d+) ready_all_s ([\d.]+) sandboxes_per_s ([\d.]+) cpu_ms_per_sandbox ([\d.]+)", l)
    if m:
        rows[(m.group(1), int(m.group(2)))] = (float(m.group(3)), float(m.group(4)), float(m.group(5)))
print("%-9s %-3s %10s %12s %12s %18s" % ("how", "k", "ready (s)", "per second", "CPU ms/sb", "vs bwrap (rate)"))
for (how, k), (t, rate, cpu) in sorted(rows.items(), key=lambda x: (x[0][1], x[0][0])):
    bw = rows.get(("bwrap", k))
    print("%-9s %-3d %10.2f %12.1f %12.2f %18s" % (how, k, t, rate, cpu,
          "%.2fx" % (rate / bw[1]) if bw and how != "bwrap" else ""))
EOF
