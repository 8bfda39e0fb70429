#!/bin/bash
# Step mode's overhead (issue 31 item 4): N live envs of `lis serve`'s episodes API, each stepped
# R times with a trivial command (`true`) by one trainer thread per env, all at once; the overhead
# of a step is its round trip (POST envs/ID/step to its answer) minus the command's own time as
# lis measured it (info.tool_s). The same command run by docker-py's exec_run in N containers of
# the same lis serve (what the original's RL environment does per action), round trip as is.
# Then ONE steps one at a time (a single trainer thread, envs taken in a scattered order) while
# the other N-1 envs stay live and idle: a step's own overhead; docker-py's exec_run the same.
# Prints p50 and p99 of each and their ratio.
#
#   scripts/bench-step.sh [N] [R] [ONE]    default 512 envs, 5 steps each, 500 single steps
# Env: EFFECTS=0 (envs without the monitor's effects), LIS (default build/lis), IMAGE (a tag of lis's store; default: the Debian test fixture
#      imported as lis-bench-rl:debian, as scripts/bench-rl.sh does). Run as an unprivileged user.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
LIS=${LIS:-$top/build/lis}
N=${1:-512}
R=${2:-5}
ONE=${3:-500}
[ "$(id -u)" != 0 ] || { echo "bench-step: run as an unprivileged user (lis is rootless)"; exit 1; }
tmp=$(mktemp -d /tmp/lis-bench-step.XXXXXX)
export XDG_RUNTIME_DIR=$tmp/run XDG_DATA_HOME=${XDG_DATA_HOME:-$HOME/.local/share}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    "$LIS" sandbox gc >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null

. scripts/bench-lib/image.sh
IMG=${IMAGE:-lis-bench-rl:debian}
bench_image "$LIS" "$IMG" "$tmp" || exit 1
SOCK=$tmp/run/lis.sock
"$LIS" serve --socket "$SOCK" --rl-max-live "$N" --rl-max-n "$N" >"$tmp/serve.log" 2>&1 &
pid=$!
for _ in $(seq 200); do [ -S "$SOCK" ] && break; sleep 0.05; done

python3 - "$SOCK" "$IMG" "$N" "$R" "$top" "$ONE" <<'EOF'
import json, os, sys, threading, time
sock, image, N, R, top = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ONE = int(sys.argv[6])
sys.path.insert(0, top + "/python")
import lis

def all_at_once(fn, items):
    """fn(item) on a thread per item, all started, then all joined."""
    ts = [threading.Thread(target=fn, args=(x,)) for x in items]
    for x in ts:
        x.start()
    for x in ts:
        x.join()

def one_at_a_time(fn, items):
    """ONE calls of fn(item), items taken in a scattered order, one after another: the
    seconds of each, less what fn returns (the command's own time, or 0)."""
    out = []
    for k in range(ONE):
        t = time.perf_counter()
        own = fn(items[(k * 7919) % len(items)])
        out.append(time.perf_counter() - t - own)
    return out

def pct(a, q):
    a = sorted(a)
    return a[min(len(a) - 1, int(q * len(a)))] if a else float("nan")

eps = lis.Episodes(socket=sock, start=False)
t0 = time.time()
# every env takes R steps, then about ONE / N single ones: its max_steps must hold them all
body = {"task": {"image": image, "prompt": "bench"}, "n": N, "idle_timeout_s": 3600,
        "max_steps": min(1000, R + ONE // N + 5)}
if os.environ.get("EFFECTS", "1") == "0":
    body["effects"] = False
made = eps.create_envs(body, wait=600)
env_ids = made["env_ids"]
ready = time.time() - t0
act = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c", "type": "function",
     "function": {"name": "execute_bash", "arguments": json.dumps({"command": "true"})}}]}
over, lock = [], threading.Lock()

def trainer(env):
    c = lis.Episodes(socket=sock, start=False)
    for _ in range(R):
        t = time.perf_counter()
        d = c.step(env, act)
        rt = time.perf_counter() - t
        with lock:
            over.append(rt - (d.get("info") or {}).get("tool_s", 0.0))

all_at_once(trainer, env_ids)
# one step at a time beside the other N-1 live (idle) envs: the overhead of a step itself
one = one_at_a_time(lambda e: (eps.step(e, act).get("info") or {}).get("tool_s", 0.0), env_ids)
# the floor: the same client's round trip of a GET of one env (HTTP, JSON, no step)
floor = one_at_a_time(lambda e: (eps.env(e), 0.0)[1], env_ids)
for e in env_ids:
    eps.delete_env(e)

import docker
cli = docker.DockerClient(base_url="unix://" + sock, max_pool_size=N + 8, timeout=600)
cs = []
def make(_):
    c = cli.containers.run(image, ["sleep", "infinity"], detach=True, network_mode="none")
    with lock:
        cs.append(c)
all_at_once(make, range(N))
dk = []
def exec_(c):
    for _ in range(R):
        t = time.perf_counter()
        c.exec_run(["bash", "-c", "true"])
        with lock:
            dk.append(time.perf_counter() - t)
all_at_once(exec_, cs)
dk1 = one_at_a_time(lambda c: (c.exec_run(["bash", "-c", "true"]), 0.0)[1], cs)
for c in cs:
    c.remove(force=True)
print("step mode: %d live envs ready in %.2fs, %d steps each, all at once" % (N, ready, R))
print("  %-52s %10s %10s" % ("", "p50", "p99"))
print("  %-52s %9.2fms %9.2fms" % ("step overhead (round trip - the command's tool_s)",
                                   pct(over, .5) * 1e3, pct(over, .99) * 1e3))
print("  %-52s %9.2fms %9.2fms" % ("docker-py exec_run of the same command (round trip)",
                                   pct(dk, .5) * 1e3, pct(dk, .99) * 1e3))
print("  step overhead / docker-py exec: p50 %.3fx, p99 %.3fx"
      % (pct(over, .5) / pct(dk, .5), pct(over, .99) / pct(dk, .99)))
print("one step at a time, %d steps, the other %d envs live and idle" % (ONE, N - 1))
print("  %-52s %9.2fms %9.2fms" % ("step overhead (round trip - the command's tool_s)",
                                   pct(one, .5) * 1e3, pct(one, .99) * 1e3))
print("  %-52s %9.2fms %9.2fms" % ("the floor: GET envs/ID's round trip (no step)",
                                   pct(floor, .5) * 1e3, pct(floor, .99) * 1e3))
print("  %-52s %9.2fms %9.2fms" % ("docker-py exec_run of the same command (round trip)",
                                   pct(dk1, .5) * 1e3, pct(dk1, .99) * 1e3))
print("  step overhead / docker-py exec: p50 %.3fx, p99 %.3fx"
      % (pct(one, .5) / pct(dk1, .5), pct(one, .99) / pct(dk1, .99)))
EOF
