#!/bin/bash
# Runtime benchmarks, each against a peer measured in the same run:
#   cold start    lis sandbox run -- /bin/true   vs  bwrap --unshare-all ... /bin/true
#   warm exec     lis API / lis sandbox exec      vs  nsenter into a bwrap sandbox (root)
#   density       N idle lis sandboxes            vs  N idle bwrap sandboxes
# Run as root (it drops to $LIS_BENCH_USER for everything rootless) after `make tests`.
# Env: BENCH_N (density, default 512), BENCH_RUNS (hyperfine runs, default 100),
#      LIS_BENCH_USER (default lis-test), BENCH_WORK (its scratch dir, default /var/tmp/lis-bench),
#      B (the build dir measured, default build: a build of another commit compares it).
set -u
cd "$(dirname "$0")/.."
user=${LIS_BENCH_USER:-lis-test}
N=${BENCH_N:-512}
RUNS=${BENCH_RUNS:-100}
work=${BENCH_WORK:-/var/tmp/lis-bench}
B=${B:-build}
for t in hyperfine bwrap; do command -v $t >/dev/null || { echo "bench: $t missing (scripts/deps.sh)"; exit 1; }; done
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (it runs the sandboxes as $user)"; exit 1; }
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
rm -rf "$work"; mkdir -p "$work"; chmod 755 "$work"
cp -a "$B" "$work/build"; chmod -R a+rX "$work/build"
bash scripts/make-test-rootfs.sh busybox "$work/busybox"
bash scripts/make-test-rootfs.sh debian "$work/debian" 2>/dev/null || echo "note: no Debian tree; density uses busybox"
chown -R "$user:$user" "$work"
R=$work/busybox
D=$work/debian; [ -x "$D/bin/bash" ] || D=$R
LIS=$work/build/lis
as() { runuser -u "$user" -- env XDG_RUNTIME_DIR= HOME="$(getent passwd "$user" | cut -d: -f6)" "$@"; }
median() { hyperfine -N -w 5 -r "$RUNS" --export-json "$work/h.json" "$@" >/dev/null 2>&1
           python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print(" ".join("%.3f"%(x["median"]*1000) for x in r))' "$work/h.json"; }
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1])/float(sys.argv[2])))" "$1" "$2"; }

echo "== machine: $(nproc) cores, $(uname -r), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg), build $B"
echo "== cold start: /bin/true in a fresh sandbox (busybox rootfs, user $user), median ms"
read -r l_full l_single b <<<"$(as bash -c "$(declare -f median); RUNS=$RUNS; work=$work; median \
  '$LIS sandbox run --rootfs $R -- /bin/true' \
  '$LIS sandbox run --uidmap single --rootfs $R -- /bin/true' \
  'bwrap --unshare-all --dev /dev --proc /proc --bind $R / /bin/true'")"
echo "lis (full uid map)    $l_full ms"
echo "lis (single uid map)  $l_single ms"
echo "bwrap                 $b ms"
echo "ratio lis/bwrap       $(ratio "$l_full" "$b") (single map: $(ratio "$l_single" "$b"); goal <= 0.5)"
as "$work/build/tests/bench_api" cold "$R" 200 | sed 's/^/api  /'

echo "== warm exec: /bin/true in a running sandbox, median ms"
as "$LIS" sandbox rm benchw >/dev/null 2>&1
as "$LIS" sandbox create --rootfs "$R" --name benchw >/dev/null 2>&1
read -r cli_exec <<<"$(as bash -c "$(declare -f median); RUNS=$((RUNS*3)); work=$work; median '$LIS sandbox exec benchw -- /bin/true'")"
as "$LIS" sandbox rm benchw >/dev/null 2>&1
api=$(as "$work/build/tests/bench_api" warm "$R" 2000 | awk '/median/ {print $2}')
# Only root can enter a rootless bwrap sandbox (nested user namespace), so nsenter runs as root.
bwrap --unshare-all --dev /dev --proc /proc --bind "$R" / /bin/sleep 600 & bw=$!
sleep 0.5
inner=$(pgrep -P "$bw" | head -n1); inner=${inner:-$bw}
read -r ns <<<"$(median "nsenter -t $inner -a /bin/true")"
kill "$inner" "$bw" 2>/dev/null; wait "$bw" 2>/dev/null # the inner sleep too: it holds our stdout
echo "lis API exec          $api ms (goal <= 1)"
echo "lis sandbox exec      $cli_exec ms (goal <= 3)"
echo "nsenter into bwrap    $ns ms"
echo "ratio CLI/nsenter     $(ratio "$cli_exec" "$ns"); API/nsenter $(ratio "$api" "$ns")"

echo "== density: $N idle sandboxes ($( [ "$D" = "$R" ] && echo busybox || echo Debian ) rootfs)"
as "$work/build/tests/bench_api" density "$D" "$N" | tee "$work/density.txt"
sync; sleep 1
avail0=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
t0=$(date +%s.%N)
as bash -c "for i in \$(seq $N); do bwrap --unshare-all --die-with-parent --dev /dev --proc /proc --bind $D / /bin/sleep 600 & done; sleep 2; \
  awk '/MemAvailable/ {print \$2}' /proc/meminfo > $work/bw-avail; pkill -u $user -x bwrap; wait" 2>/dev/null
t1=$(date +%s.%N)
avail1=$(cat "$work/bw-avail")
python3 - "$avail0" "$avail1" "$N" "$t0" "$t1" <<'PY'
import sys
a0, a1, n, t0, t1 = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
print("bwrap_memavailable_drop_mb_per_sandbox %.3f" % ((a0 - a1) / 1024 / n))
print("bwrap_start_all_plus_2s_s %.2f" % (t1 - t0))
PY
