#!/bin/bash
# A neighbour's latency while N CPU-hog sandboxes run (issue 22, item 5): the median
# wall time of `lis sandbox exec NB -- true` in a neighbour sandbox of the same user,
# and of another user's `/bin/true` on the host, idle and then with N sandboxes each
# running a busy loop: ratios measured in the same run. Under the fallback limits (no
# cgroup) the hogs are held by lis-init's CPU watch; with cgroup v2 by cpu.weight
# (docs/runtime.md). Usage, after `make`:
#   scripts/bench-cpu-hogs.sh [N=64] [SAMPLES=30]
# As root the sandboxes run as $LIS_TEST_USER (default lis-test) and "another user" is
# $LIS_TEST_USER-b; as an ordinary user both are that user.
set -u
cd "$(dirname "$0")/.."
N=${1:-64}
S=${2:-30}
user=${LIS_TEST_USER:-lis-test}
work=${LIS_TEST_WORK:-/var/tmp/lis-test-$(id -u)}
dir="$work/bench-cpu"
rm -rf "$dir" 2>/dev/null
mkdir -p "$dir/run" "$dir/data"
bash scripts/make-test-rootfs.sh busybox "$dir/busybox" >/dev/null || exit 1
cp -a "${B:-build}/lis" "${B:-build}/lis-init" "$dir/"
LIS="$dir/lis"

as() { # as USER CMD...: a command as the sandboxes' user, or "other"
    local who=$1
    shift
    if [ "$(id -u)" -ne 0 ]; then
        env XDG_RUNTIME_DIR="$dir/run" XDG_DATA_HOME="$dir/data" "$@"
    elif [ "$who" = other ]; then
        runuser -u "$user-b" -- "$@"
    else
        runuser -u "$user" -- env HOME="$(getent passwd "$user" | cut -d: -f6)" \
            XDG_RUNTIME_DIR="$dir/run" XDG_DATA_HOME="$dir/data" "$@"
    fi
}
if [ "$(id -u)" -eq 0 ]; then
    id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
    id "$user-b" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user-b"
    chown -R "$user:$user" "$dir"
    chmod 755 "$work" "$dir"
fi
cleanup() {
    # the hogs' lis processes (their sandboxes die with them): by their unique path, since
    # as root they are runuser's children
    pkill -KILL -f "^$dir/lis sandbox run" 2>/dev/null
    kill $(jobs -p) 2>/dev/null
    wait 2>/dev/null
    as sandboxes "$LIS" sandbox rm --all >/dev/null 2>&1
    rm -rf "$dir" 2>/dev/null
}
trap cleanup EXIT

# the median ms of S runs of a command, timed by python3 in the same user's process
median() {
    local who=$1
    shift
    as "$who" python3 -c '
import subprocess, sys, time
n, cmd = int(sys.argv[1]), sys.argv[2:]
t = []
for _ in range(n):
    t0 = time.monotonic()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t.append((time.monotonic() - t0) * 1000)
t.sort()
print("%.1f" % t[len(t) // 2])' "$S" "$@"
}

as sandboxes "$LIS" sandbox create --name nb --rootfs "$dir/busybox" >/dev/null 2>&1 ||
    { echo "cannot create a sandbox"; exit 1; }
limits=$(as sandboxes "$LIS" sandbox ls --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["limits"])')

nb_idle=$(median sandboxes "$LIS" sandbox exec nb -- true)
host_idle=$(median other /bin/true)

for i in $(seq 1 "$N"); do
    as sandboxes "$LIS" sandbox run --rootfs "$dir/busybox" -- sh -c 'while :; do :; done' \
        >/dev/null 2>&1 &
done
count() { ps -e -o args= | grep -c '^sh -c while :; do :; done'; }
for i in $(seq 1 120); do # every hog started (they start slowly on a busy host)
    [ "$(count)" -ge "$N" ] && break
    sleep 1
done
# Under the fallback a hog goes to nice 19 once it has wanted a CPU for 4 s; the kernel
# lets an unprivileged process renice an autogroup ten times a second host-wide, so 64
# groups take ~7 s more: measured 15 s in, then 35 s in (SCHED_IDLE from 30 s).
hog_pids() { ps -e -o pid=,args= | awk '$2 == "sh" && $4 == "while" {print $1}'; }
with_field() { # how many hogs have stat field $1 equal to $2
    for p in $(hog_pids); do awk -v f="$1" '{print $f}' "/proc/$p/stat" 2>/dev/null; done |
        grep -c "^$2\$"
}
sleep 15
hogs=$(count)
niced=$(with_field 19 19)
nb_step1=$(median sandboxes "$LIS" sandbox exec nb -- true)
host_step1=$(median other /bin/true)
sleep 20
idle=$(with_field 41 5)
nb_hogs=$(median sandboxes "$LIS" sandbox exec nb -- true)
host_hogs=$(median other /bin/true)

echo "== $(nproc) cores, $(uname -r), $(date +%F), limits: $limits, $hogs of $N hogs running," \
    "$niced of them at nice 19 at 15 s, $idle SCHED_IDLE at 35 s, autogroups $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo -)"
python3 - "$nb_idle" "$nb_step1" "$nb_hogs" "$host_idle" "$host_step1" "$host_hogs" "$N" <<'EOF'
import sys
a, b, c, d, e, f = map(float, sys.argv[1:7])
n = sys.argv[7]
for name, i, s1, s2 in (("neighbour sandbox exec `true`", a, b, c), ("another user's `/bin/true`", d, e, f)):
    print("%-30s idle %6.1f ms; with %s hogs: 15 s in %7.1f ms (ratio %.2f), 35 s in %7.1f ms (ratio %.2f)"
          % (name + ":", i, n, s1, s1 / i, s2, s2 / i))
EOF
