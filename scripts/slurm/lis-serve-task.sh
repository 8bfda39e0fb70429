#!/bin/bash
# lis-serve-task.sh JOB_DIR TLS_DIR [lis serve flags...] - one task of lis-serve.sbatch's srun
# step: one `lis serve --tcp` with mutual TLS on this node, its state node-local, its endpoint
# written to JOB_DIR/up/K once it answers; ends (and removes its state) when the step does.
set -uo pipefail
job=$1 tls=$2
shift 2
lis=${LIS_BIN:-lis}
k=${SLURM_PROCID:?not a Slurm task}
port=$((${LIS_SERVE_PORT:-2376} + ${SLURM_LOCALID:-0}))
node=${SLURMD_NODENAME:-$(hostname -s)}
# the address the trainer dials: the node's NodeAddr (in the server certificate), else its name
addr=$(scontrol show node -o "$node" 2>/dev/null | sed -nE 's/.*NodeAddr=([^ ]+).*/\1/p')
addr=${LIS_SERVE_HOST:-${addr:-$node}}
# mktemp: a name no other local user can guess and make first (0700 from the start)
state=$(mktemp -d "${LIS_SERVE_STATE:-${TMPDIR:-/tmp}}/lis-serve-$(id -u)-${SLURM_JOB_ID:-0}-$k.XXXXXX") &&
    mkdir -m 700 "$state/run" "$state/data" ||
    { echo "lis-serve-task: cannot make a state directory in ${LIS_SERVE_STATE:-${TMPDIR:-/tmp}}" >&2; exit 1; }
export XDG_RUNTIME_DIR=$state/run XDG_DATA_HOME=$state/data
pid=
finish() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null # lis serve ends its sandboxes as it exits
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    rm -f "$job/up/$k"
    "$lis" sandbox gc >/dev/null 2>&1 # what a killed server left: mounts, cgroups
    # the store's files belong to the user's subordinate ids: lis removes them, not rm
    for r in $("$lis" rootfs ls --json 2>/dev/null | grep -o '"ref":"[^"]*"' | cut -d'"' -f4); do
        "$lis" rootfs rm "$r" --force >/dev/null 2>&1
    done
    "$lis" rootfs gc >/dev/null 2>&1
    rm -rf "$state"
    exit $rc
}
trap finish EXIT
trap 'exit 143' INT TERM

if [ -n "${LIS_IMAGE_ARCHIVE:-}" ]; then
    name=${LIS_IMAGE_NAME:?LIS_IMAGE_ARCHIVE needs LIS_IMAGE_NAME (the name to import it as)}
    "$lis" rootfs import "$LIS_IMAGE_ARCHIVE" --name "$name" -q >/dev/null ||
        { echo "lis-serve-task: importing $LIS_IMAGE_ARCHIVE as $name failed" >&2; exit 1; }
fi
echo "lis-serve-task $k: lis serve on $node, tcp://$addr:$port, state in $state"
"$lis" serve --socket "$state/run/lis.sock" --tcp "0.0.0.0:$port" --tls-dir "$tls" "$@" &
pid=$!
# up once the unix socket answers and the TCP port accepts (the same process serves both)
for _ in $(seq 600); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; echo "lis-serve-task $k: lis serve exited" >&2; exit 1; }
    if [ -S "$state/run/lis.sock" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "tcp://$addr:$port" >"$job/up/$k.tmp" && mv "$job/up/$k.tmp" "$job/up/$k"
        break
    fi
    sleep 0.1
done
[ -f "$job/up/$k" ] || { echo "lis-serve-task $k: not up after 60 s" >&2; exit 1; }
wait "$pid"
