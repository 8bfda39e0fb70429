#!/bin/bash
# `lis serve` against dockerd, with the same client (docker-py, python3-docker) and the
# same image (the busybox fixture: `lis rootfs import` for lis, `docker import` for dockerd):
#   exec      median exec_run("true") in a running container          goal <= 0.2x dockerd
#   run+rm    median containers.run("sleep infinity") + remove(force)  goal <= 0.1x dockerd
#   parallel  64 client processes x 20 execs, each in its own container: wall time, lost output
# Run as root after `make`: lis serve runs rootless as $LIS_BENCH_USER; dockerd (the peer)
# runs only here, as root: --storage-driver=vfs --bridge=none --iptables=false, private
# data and exec roots under the work dir, stopped and removed at the end.
# Env: N_EXEC (200), N_RUN (30), PAR_N (64), PAR_EXECS (20), LIS_BENCH_USER (lis-test).
set -u
cd "$(dirname "$0")/.."
user=${LIS_BENCH_USER:-lis-test}
work=/var/tmp/lis-bench-serve
for t in dockerd docker python3; do command -v $t >/dev/null || { echo "bench: $t missing (scripts/deps.sh)"; exit 1; }; done
python3 -c 'import docker' 2>/dev/null || { echo "bench: python3-docker missing (scripts/deps.sh)"; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (lis serve runs as $user, dockerd as root)"; exit 1; }
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
rm -rf "$work"; mkdir -p "$work"; chmod 755 "$work"
cp -a build "$work/build"; chmod -R a+rX "$work/build"
cp scripts/bench-serve.py "$work/"; chmod a+r "$work/bench-serve.py"
bash scripts/make-test-rootfs.sh busybox "$work/busybox" >/dev/null
tar -C "$work/busybox" -cf "$work/image.tar" .
chown -R "$user:$user" "$work"
IMG=lis-bench:v1
as() { runuser -u "$user" -- env XDG_RUNTIME_DIR= HOME="$(getent passwd "$user" | cut -d: -f6)" \
       XDG_DATA_HOME="$work/data" "$@"; }
ratio() { python3 -c "import sys; print('%.3f' % (float(sys.argv[1])/float(sys.argv[2])))" "$1" "$2"; }
field() { python3 -c "import json,sys; print('%.3f' % json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
lis_pid="" docker_pid=""
cleanup() {
    if [ -n "$lis_pid" ]; then # runuser does not pass SIGTERM on: stop lis serve itself
        pkill -TERM -P "$lis_pid" 2>/dev/null
        wait "$lis_pid" 2>/dev/null
    fi
    if [ -n "$docker_pid" ]; then
        DOCKER_HOST=unix://$work/docker.sock docker rm -f $(DOCKER_HOST=unix://$work/docker.sock docker ps -aq) >/dev/null 2>&1
        kill "$docker_pid" 2>/dev/null; wait "$docker_pid" 2>/dev/null
    fi
    rm -rf "$work/docker-data" "$work/docker-exec"
}
trap cleanup EXIT

echo "== machine: $(nproc) cores, $(uname -r), $(date -u +%F); dockerd $(dockerd --version | awk '{print $3}' | tr -d ,)"
as "$work/build/lis" rootfs import "$work/image.tar" --name "$IMG" -q >/dev/null || exit 1
as "$work/build/lis" serve --socket "$work/lis.sock" >"$work/lis-serve.log" 2>&1 </dev/null & lis_pid=$!
dockerd --storage-driver=vfs --bridge=none --iptables=false --ip6tables=false \
    --data-root "$work/docker-data" --exec-root "$work/docker-exec" --pidfile "$work/docker.pid" \
    -H "unix://$work/docker.sock" >"$work/dockerd.log" 2>&1 </dev/null & docker_pid=$!
for _ in $(seq 100); do [ -S "$work/lis.sock" ] && [ -S "$work/docker.sock" ] && break; sleep 0.2; done
DOCKER_HOST=unix://$work/docker.sock docker import "$work/image.tar" "$IMG" >/dev/null || { echo "bench: docker import failed"; tail "$work/dockerd.log"; exit 1; }

echo "== lis serve (rootless, user $user)"
l=$(as python3 "$work/bench-serve.py" "$work/lis.sock" "$IMG") || { echo "bench: lis run failed"; exit 1; }
echo "$l"
echo "== dockerd (root, vfs)"
d=$(python3 "$work/bench-serve.py" "$work/docker.sock" "$IMG") || { echo "bench: dockerd run failed"; exit 1; }
echo "$d"
echo "== ratios lis/dockerd"
printf 'exec_run("true") median   lis %8s ms  dockerd %8s ms  ratio %s (goal <= 0.2)\n' \
    "$(field "$l" exec_ms)" "$(field "$d" exec_ms)" "$(ratio "$(field "$l" exec_ms)" "$(field "$d" exec_ms)")"
printf 'run + remove median       lis %8s ms  dockerd %8s ms  ratio %s (goal <= 0.1)\n' \
    "$(field "$l" run_rm_ms)" "$(field "$d" run_rm_ms)" "$(ratio "$(field "$l" run_rm_ms)" "$(field "$d" run_rm_ms)")"
printf '%s x %s parallel execs     lis %8s s   dockerd %8s s   ratio %s; lost output: lis %s, dockerd %s\n' \
    "${PAR_N:-64}" "${PAR_EXECS:-20}" "$(field "$l" par_s)" "$(field "$d" par_s)" \
    "$(ratio "$(field "$l" par_s)" "$(field "$d" par_s)")" \
    "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['par_lost'])" "$l")" \
    "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['par_lost'])" "$d")"
