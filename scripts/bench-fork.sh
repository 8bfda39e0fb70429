#!/bin/bash
# Fork, snapshot, pause and resume against dockerd and against fresh sandboxes, in one run:
#   fork16 (1 MB)    lis_sandbox_fork(16) of a sandbox whose writable layer holds 1 MiB
#                    goal <= 100 ms; <= 0.05x dockerd's `docker commit` + 16 x `docker run -d`
#   fork16 (100 MB)  the same with 100 MiB
#   fresh16          16 new sandboxes on the image itself: the floor under any fork
#   pause / resume   lis_sandbox_pause / _resume of a running sandbox, goal <= 5 ms each
# lis runs rootless as $LIS_BENCH_USER through the C API (tests/bench_fork.c); dockerd (the
# peer) runs only here, as root, as in bench-serve.sh: --storage-driver=vfs --bridge=none
# --iptables=false, private data and exec roots, stopped and removed at the end; its side is
# timed with docker-py (scripts/bench-fork.py) on the same busybox image.
# Run as root after `make tests`. Env: REPS (lis 10, dockerd 3), LIS_BENCH_USER (lis-test).
set -u
cd "$(dirname "$0")/.."
user=${LIS_BENCH_USER:-lis-test}
work=/var/tmp/lis-bench-fork
reps=${REPS:-10}
dreps=${DOCKER_REPS:-3}
for t in dockerd docker python3; do command -v $t >/dev/null || { echo "bench: $t missing (scripts/deps.sh)"; exit 1; }; done
python3 -c 'import docker' 2>/dev/null || { echo "bench: python3-docker missing (scripts/deps.sh)"; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (lis runs as $user, dockerd as root)"; exit 1; }
[ -x build/tests/bench_fork ] || { echo "bench: build/tests/bench_fork missing (make tests)"; exit 1; }
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
rm -rf "$work"; mkdir -p "$work"; chmod 755 "$work"
cp -a build "$work/build"; chmod -R a+rX "$work/build"
cp scripts/bench-fork.py "$work/"
bash scripts/make-test-rootfs.sh busybox "$work/busybox" >/dev/null
tar -C "$work/busybox" -cf "$work/image.tar" .
chown -R "$user:$user" "$work"
IMG=lis-bench:v1
as() { runuser -u "$user" -- env XDG_RUNTIME_DIR= HOME="$(getent passwd "$user" | cut -d: -f6)" \
       XDG_DATA_HOME="$work/data" "$@"; }
ratio() { python3 -c "import sys; print('%.3f' % (float(sys.argv[1])/float(sys.argv[2])))" "$1" "$2"; }
key() { awk -v k="$2" '$1 == k {print $2}' <<<"$1"; }
docker_pid=""
cleanup() {
    if [ -n "$docker_pid" ]; then
        DOCKER_HOST=unix://$work/docker.sock docker rm -f $(DOCKER_HOST=unix://$work/docker.sock docker ps -aq) >/dev/null 2>&1
        kill "$docker_pid" 2>/dev/null; wait "$docker_pid" 2>/dev/null
    fi
    rm -rf "$work/docker-data" "$work/docker-exec" "$work/data"
}
trap cleanup EXIT

echo "== machine: $(nproc) cores, $(uname -r), $(date -u +%F); dockerd $(dockerd --version | awk '{print $3}' | tr -d ,)"
echo "== lis (rootless, user $user, C API, $reps repetitions each)"
l1=$(as "$work/build/tests/bench_fork" "$work/busybox" 1 16 "$reps" 2>/dev/null) || { echo "bench: lis 1 MB failed"; exit 1; }
l100=$(as "$work/build/tests/bench_fork" "$work/busybox" 100 16 "$reps" 2>/dev/null) || { echo "bench: lis 100 MB failed"; exit 1; }
echo "$l1" | sed 's/^/1MB   /'
echo "$l100" | sed 's/^/100MB /'

dockerd --storage-driver=vfs --bridge=none --iptables=false --ip6tables=false \
    --data-root "$work/docker-data" --exec-root "$work/docker-exec" --pidfile "$work/docker.pid" \
    -H "unix://$work/docker.sock" >"$work/dockerd.log" 2>&1 </dev/null & docker_pid=$!
for _ in $(seq 100); do [ -S "$work/docker.sock" ] && break; sleep 0.2; done
DOCKER_HOST=unix://$work/docker.sock docker import "$work/image.tar" "$IMG" >/dev/null || { echo "bench: docker import failed"; tail "$work/dockerd.log"; exit 1; }
echo "== dockerd (root, vfs, $dreps repetitions each): docker commit + 16 x docker run -d"
d1=$(python3 "$work/bench-fork.py" "$work/docker.sock" "$IMG" 1 16 "$dreps") || { echo "bench: dockerd 1 MB failed"; exit 1; }
d100=$(python3 "$work/bench-fork.py" "$work/docker.sock" "$IMG" 100 16 "$dreps") || { echo "bench: dockerd 100 MB failed"; exit 1; }
dj() { python3 -c "import json,sys; print('%.1f' % json.loads(sys.argv[1])['fork_ms'])" "$1"; }
echo "1MB   $d1"; echo "100MB $d100"

echo "== results (medians)"
printf 'fork16, 1 MB layer     lis %8s ms  dockerd %9s ms  ratio %s (goals: <= 100 ms, <= 0.05x)\n' \
    "$(key "$l1" fork_ms)" "$(dj "$d1")" "$(ratio "$(key "$l1" fork_ms)" "$(dj "$d1")")"
printf 'fork16, 100 MB layer   lis %8s ms  dockerd %9s ms  ratio %s\n' \
    "$(key "$l100" fork_ms)" "$(dj "$d100")" "$(ratio "$(key "$l100" fork_ms)" "$(dj "$d100")")"
printf 'fresh16 (the floor)    lis %8s ms  (fork16 1 MB / fresh16 = %s)\n' \
    "$(key "$l1" fresh_ms)" "$(ratio "$(key "$l1" fork_ms)" "$(key "$l1" fresh_ms)")"
printf 'sandbox stopped for the snapshot: %s ms (1 MB), %s ms (100 MB)\n' \
    "$(key "$l1" snapshot_paused_ms)" "$(key "$l100" snapshot_paused_ms)"
printf 'pause %s ms, resume %s ms (goal <= 5 ms each)\n' "$(key "$l1" pause_ms)" "$(key "$l1" resume_ms)"
