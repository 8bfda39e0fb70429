#!/bin/bash
# RL rollouts over 1 and 2 `lis serve` services (issue 31 item 3): G groups x N episodes of one
# task, 4 model turns each, spread by the Python client's lis.Cluster over the services' TCP
# ports with mutual TLS (one CA, as scripts/slurm/lis-serve.sbatch makes it), against
# tests/fake_llm.py answering after LATENCY seconds. Both services run on this machine, each
# with its own state (as two nodes would); a run with 1 service uses the first only, a run with
# 2 uses both, alternating (1, 2, 1, 2...) so that the host's noise falls on both.
# Prints per run and per kind: groups per second (G / the step's wall time), the time from the
# step's start to each episode's first model call (p50, p99; stamped by a proxy in front of the
# endpoint, scripts/bench-lib/stamp-proxy.py), how the groups were spread, and 2 against 1.
#
#   scripts/bench-scale.sh [G] [N] [ROUNDS]    default 32 4 2
# Each service is capped as a node would be by its size: SERVE_FLAGS (default --rl-max-live 32,
# so that 2 services hold twice the episodes at once; both share this host's CPUs, which a
# second node would not).
# Env: LIS (default build/lis), LATENCY (default 1), IMAGE (default: the Debian test fixture
#      imported as lis-bench-rl:debian into each service's store). Run as an unprivileged user.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
LIS=${LIS:-$top/build/lis}
G=${1:-32}
N=${2:-4}
ROUNDS=${3:-2}
LAT=${LATENCY:-1}
SERVE_FLAGS=${SERVE_FLAGS:---rl-max-live 32}
[ "$(id -u)" != 0 ] || { echo "bench-scale: run as an unprivileged user (lis is rootless)"; exit 1; }
tmp=$(mktemp -d /tmp/lis-bench-scale.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    for s in 1 2; do
        XDG_RUNTIME_DIR=$tmp/s$s/run XDG_DATA_HOME=$tmp/s$s/data "$LIS" sandbox gc >/dev/null 2>&1
        [ -n "${IMAGE:-}" ] || XDG_DATA_HOME=$tmp/s$s/data bench_store_clear "$LIS"
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null
. scripts/bench-lib/image.sh

python3 - "$tmp/script.json" "$LAT" <<'EOF'
import json, sys
turns = [["execute_bash", {"command": "mkdir -p /testbed/output && seq 1 1000 | awk '{s+=$1} END {print s}' > /testbed/output/answer.txt"}],
         ["execute_bash", {"command": "cat /testbed/output/answer.txt"}],
         ["execute_bash", {"command": "ls /testbed"}],
         ["submit", {}]]
json.dump({"latency": float(sys.argv[2]), "rows": {},
           "default": [{"calls": [t], "usage": [1000, 50]} for t in turns]}, open(sys.argv[1], "w"))
EOF
python3 tests/fake_llm.py "$tmp/script.json" >"$tmp/fake.port" 2>"$tmp/fake.err" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/fake.port" ] && break; sleep 0.1; done
python3 scripts/bench-lib/stamp-proxy.py "$(head -n1 "$tmp/fake.port")" "$tmp/calls.jsonl" \
    >"$tmp/proxy.port" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/proxy.port" ] && break; sleep 0.1; done
URL="http://127.0.0.1:$(head -n1 "$tmp/proxy.port")/v1"

"$LIS" serve --tls-init "$tmp/tls" >/dev/null || { echo "bench-scale: --tls-init failed"; exit 1; }
ports=$(python3 -c 'import socket
ps = []
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ps.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ps))')
eps=()
k=0
for port in $ports; do
    k=$((k + 1))
    mkdir -p "$tmp/s$k/run" "$tmp/s$k/data" && chmod 700 "$tmp/s$k/run"
    IMG=${IMAGE:-lis-bench-rl:debian}
    [ -n "${IMAGE:-}" ] || XDG_DATA_HOME=$tmp/s$k/data bench_image "$LIS" "$IMG" "$tmp" || exit 1
    # shellcheck disable=SC2086
    XDG_RUNTIME_DIR=$tmp/s$k/run XDG_DATA_HOME=$tmp/s$k/data "$LIS" serve \
        --socket "$tmp/s$k/run/lis.sock" --tcp "127.0.0.1:$port" --tls-dir "$tmp/tls" \
        $SERVE_FLAGS >"$tmp/s$k/serve.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do [ -S "$tmp/s$k/run/lis.sock" ] && break; sleep 0.05; done
    eps+=("tcp://127.0.0.1:$port")
done

SERVE_FLAGS=$SERVE_FLAGS python3 - "$tmp" "$top" "$G" "$N" "$ROUNDS" "$URL" "$IMG" "${eps[@]}" <<'EOF'
import json, os, statistics, sys, time
tmp, top, G, N, ROUNDS, url, image = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
eps = sys.argv[8:]
sys.path.insert(0, os.path.join(top, "python"))
import lis

def pct(a, q):
    a = sorted(a)
    return a[min(len(a) - 1, int(q * len(a)))] if a else float("nan")

runs = []
for r in range(ROUNDS):
    for k in (1, 2):
        way = ("one", "two")[k - 1] + "abcdefghijklmnopqrstuvwxyz"[r % 26]
        c = lis.Cluster(eps[:k], cert_path=os.path.join(tmp, "tls"))
        bodies = [{"task": {"image": image, "prompt": "RL-%s-G%03d: sum 1..1000" % (way, g),
                            "answer_file": "/testbed/output/answer.txt",
                            "reward": {"scorer": "builtin:match", "ground_truth": "500500"}},
                   "n": N, "inference": {"base_url": url, "model": "fake", "api_key": "k"},
                   "max_steps": 10} for g in range(G)]
        t0 = time.time()
        step = c.collect(bodies, deadline_s=1800)
        wall = time.time() - t0
        calls = [json.loads(l) for l in open(os.path.join(tmp, "calls.jsonl"))]
        first = [x["t"] - t0 for x in calls if x.get("way") == way and x.get("step") == 0]
        spread = {e: sum(1 for g in step if g.endpoint == e) for e in eps[:k]}
        rewarded = sum(1 for g in step for x in g.rewards if x == 1.0)
        runs.append({"k": k, "wall": wall, "gps": G / wall, "first": first, "spread": spread,
                     "done": sum(1 for g in step if g.done and g.error is None),
                     "rewarded": rewarded})
        print("run %d, %d service(s): %d of %d groups done, %d of %d episodes rewarded, "
              "%.1f s, %.2f groups/s, first call p50 %.2f s p99 %.2f s, groups per service %s"
              % (r + 1, k, runs[-1]["done"], G, rewarded, G * N, wall, G / wall,
                 pct(first, .5), pct(first, .99), list(spread.values())), flush=True)
print("\n%d groups x %d episodes, 4 model turns of %s s each, each service %s; median over "
      "%d runs a kind" % (G, N, os.environ.get("LATENCY", "1"), os.environ.get("SERVE_FLAGS"), ROUNDS))
print("  %-12s %12s %18s %18s" % ("services", "groups/s", "first call p50", "first call p99"))
med = {}
for k in (1, 2):
    rs = [x for x in runs if x["k"] == k]
    gps = statistics.median(x["gps"] for x in rs)
    f50 = statistics.median(pct(x["first"], .5) for x in rs)
    f99 = statistics.median(pct(x["first"], .99) for x in rs)
    med[k] = (gps, f50, f99)
    print("  %-12d %12.2f %17.2fs %17.2fs" % (k, gps, f50, f99))
print("  2 against 1: groups/s %.2fx, first call p50 %.2fx, p99 %.2fx"
      % (med[2][0] / med[1][0], med[2][1] / med[1][1], med[2][2] / med[1][2]))
EOF
