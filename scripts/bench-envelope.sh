#!/bin/bash
# Per-sandbox memory envelope: the cgroup's memory peak (v2 memory.peak, or the v1 fallback's
# memory.max_usage_in_bytes) of a fresh sandbox for each workload, next to the seed's figures
# (~50 MB idle, ~200 MB peak per sandbox).
#
#   scripts/bench-envelope.sh [ROOTFS]      default ROOTFS: $LIS_BENCH_ROOTFS, else a busybox
#                                           fixture built on the fly (idle only)
# Needs limits that lis can enforce: a delegated cgroup v2 subtree (e.g. in tests/vm), or root on
# a cgroup v1 host (the fallback). Workloads that the rootfs cannot run are reported as n/a.
# Env: LIS (default build/lis), REPS (default 3; the median is printed),
#      COLD=1 (root): drop the page cache before each run, so the sandbox is charged for every
#      file page it touches (warm: pages already cached by someone else are not charged to it).
set -uo pipefail
cd "$(dirname "$0")/.."
LIS=${LIS:-$PWD/build/lis}
REPS=${REPS:-3}
R=${1:-${LIS_BENCH_ROOTFS:-}}
tmp=$(mktemp -d /tmp/lis-bench-env.XXXXXX)
export XDG_RUNTIME_DIR=$tmp/run XDG_DATA_HOME=$tmp/data
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
trap '"$LIS" sandbox rm --all >/dev/null 2>&1; rm -rf "$tmp"' EXIT
if [ -z "$R" ]; then
    sh scripts/make-test-rootfs.sh busybox "$tmp/busybox" >/dev/null || exit 1
    R=$tmp/busybox
fi

# peak of the sandbox cgroup of PID 1, in bytes
peak_of() {
    local pid=$1 line dir
    line=$(grep -E '^0::|:memory:' "/proc/$pid/cgroup" | grep '/lis-' | head -n1)
    case $line in
        0::*) dir=/sys/fs/cgroup${line#0::}; cat "$dir/memory.peak" ;;
        *:memory:*)
            dir=$(awk '$9=="cgroup" && $NF ~ /memory/ {print $5; exit}' /proc/self/mountinfo)
            own=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
            # the sandbox is a child of our own memory cgroup
            cat "$dir${own%/}/$(basename "${line#*:memory:}")/memory.max_usage_in_bytes" ;;
        *) echo 0 ;;
    esac
}

measure() { # NAME SHELL-COMMAND -> median peak in MiB, or n/a
    local name=$1 cmd=$2 vals=() i pid p
    for i in $(seq 1 "$REPS"); do
        "$LIS" sandbox create --rootfs "$R" --name "bench-$i" --require-limits >/dev/null || { echo "n/a (no limits here: lis doctor)"; return; }
        pid=$("$LIS" sandbox ls --json | python3 -c "import json,sys; print([s['pid'] for s in json.load(sys.stdin) if s['name']=='bench-$i'][0])")
        [ "${COLD:-0}" = 1 ] && sync && echo 3 > /proc/sys/vm/drop_caches
        if ! "$LIS" sandbox exec "bench-$i" -- sh -c "$cmd" >/dev/null 2>&1; then
            "$LIS" sandbox rm "bench-$i" >/dev/null; echo "n/a (fails in this rootfs)"; return
        fi
        sleep 0.2
        p=$(peak_of "$pid")
        vals+=("$p")
        "$LIS" sandbox rm "bench-$i" >/dev/null
    done
    printf '%s\n' "${vals[@]}" | sort -n | awk '{a[NR]=$1} END {m=a[int((NR+1)/2)]; printf "%.1f MiB (median of %d; min %.1f, max %.1f)\n", m/1048576, NR, a[1]/1048576, a[NR]/1048576}'
}

mode="cgroup v2"; grep -q ':memory:' /proc/self/cgroup && mode="cgroup v1 fallback (root)"
echo "lis envelope benchmark: rootfs $R, kernel $(uname -r), $mode, page cache $([ "${COLD:-0}" = 1 ] && echo cold || echo warm)"
printf '%-34s %s\n' "workload" "sandbox memory peak"
printf '%-34s %s\n' "idle (PID 1 + true)" "$(measure idle true)"
printf '%-34s %s\n' "python3 -c 'import numpy'" "$(measure numpy "python3 -c 'import numpy'")"
printf '%-34s %s\n' "pip --version" "$(measure pip 'pip --version || python3 -m pip --version')"
printf '%-34s %s\n' "python3 -c pass" "$(measure python 'python3 -c pass')"
printf '%-34s %s\n' "seed (reference)" "~50 MB idle, ~200 MB peak per sandbox"
