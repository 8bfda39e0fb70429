#!/bin/bash
# The cost of effects (issue 23; docs/monitoring.md, docs/benchmarks.md): the density
# workload of scripts/bench-batch.sh (N episodes at concurrency N against tests/fake_llm.py,
# the mixed tool set: python3, the editor's create / view / str_replace, python3 on the
# edited file, grep, submit) run by `lis batch` with --effects and with
# --no-effects, alternating, ROUNDS times each, in one run. Prints per side: wall time,
# lis CPU per step, the lis process's RSS per live episode, and the ratios on/off.
#
#   scripts/bench-effects.sh [N]        default N=512
# Env: LIS (default build/lis), LATENCY (seconds per reply, default 5), ROUNDS (default 2),
#      ROOTFS (default: lis-agent:latest when the store has it, else the Debian test fixture),
#      MAX_CREATING (default: lis's own, following the machine).
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
LIS=${LIS:-$top/build/lis}
N=${1:-512}
LAT=${LATENCY:-5}
ROUNDS=${ROUNDS:-2}
tmp=$(mktemp -d /tmp/lis-bench-effects.XXXXXX)
chmod 755 "$tmp"
export XDG_RUNTIME_DIR=$tmp/run XDG_DATA_HOME=${XDG_DATA_HOME:-$HOME/.local/share}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    "$LIS" sandbox gc >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT

R=${ROOTFS:-}
if [ -z "$R" ]; then
    R=$("$LIS" rootfs inspect lis-agent:latest 2>/dev/null | python3 -c \
        "import json,sys; print(json.load(sys.stdin).get('path',''))" 2>/dev/null)
fi
if [ -z "$R" ] || [ ! -d "$R" ]; then
    R=${LIS_BENCH_ROOTFS:-/var/tmp/lis-bench-debian}
    [ -d "$R/usr/bin" ] || bash scripts/make-test-rootfs.sh debian "$R" >/dev/null || exit 1
fi
[ -x "$R/usr/bin/python3" ] || { echo "bench-effects: $R has no python3"; exit 1; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# the task and the script of bench-batch.sh
mkdir -p "$tmp/task"
cat >"$tmp/task/config.yaml" <<'YAML'
dataset: json
data_files: data.jsonl
input_dir: /testbed/input
output_dir: /testbed/output
YAML
python3 - "$tmp" "$N" "$LAT" <<'PY'
import json, sys
tmp, n, lat = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
doc = "\n".join("line %d of the notes" % i for i in range(200)) + "\nthe needle is here\n"
with open(tmp + "/task/data.jsonl", "w") as f:
    for i in range(n):
        f.write(json.dumps({"id": "b%04d" % i, "problem_statement": "ROW%04d compute it" % i,
                            "ground_truth": "333328333350000",
                            "input_files": {"notes.txt": doc}}) + "\n")
code = "n = 100000\nprint(sum(i * i for i in range(n)))\n"
steps = [
    ["execute_bash", {"command": "python3 -c 'print(sum(i*i for i in range(10**5)))'"}],
    ["str_replace_editor", {"command": "create", "path": "/testbed/sol.py",
                            "file_text": code.replace("100000", "1000")}],
    ["str_replace_editor", {"command": "view", "path": "/testbed/sol.py"}],
    ["str_replace_editor", {"command": "str_replace", "path": "/testbed/sol.py",
                            "old_str": "n = 1000", "new_str": "n = 100000"}],
    ["execute_bash", {"command": "mkdir -p /testbed/output && python3 /testbed/sol.py > "
                                 "/testbed/output/answer.txt && cat /testbed/output/answer.txt"}],
    ["execute_bash", {"command": "grep -rn needle /testbed/input | head"}],
    ["submit", {}],
]
json.dump({"latency": lat, "rows": {},
           "default": [{"calls": [s], "usage": [1000, 50]} for s in steps]},
          open(tmp + "/script.json", "w"))
PY
python3 tests/fake_llm.py "$tmp/script.json" >"$tmp/port" 2>"$tmp/fake.err" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
URL="http://127.0.0.1:$(head -n1 "$tmp/port")/v1"

# the lis batch process's own CPU (utime+stime) and peak RSS, sampled every 0.5 s
sampler() { # OUT
    python3 - "$1" <<'PY' &
import os, sys, time, json
out = sys.argv[1]
tick = os.sysconf("SC_CLK_TCK")
cpu = 0; rss = 0; live = 0
stop = out + ".stop"
while not os.path.exists(stop):
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
            if len(cmd) < 2 or not cmd[0].endswith(b"/lis") or cmd[1] != b"batch":
                continue
            st = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
            cpu = max(cpu, (int(st[11]) + int(st[12])) / tick)
            for l in open("/proc/%s/status" % p):
                if l.startswith("VmRSS:"):
                    rss = max(rss, int(l.split()[1]) * 1024)
        except (OSError, IndexError, ValueError):
            pass
    time.sleep(0.5)
json.dump({"cpu": cpu, "rss": rss}, open(out, "w"))
PY
}

run_side() { # NAME FLAGS...
    local name=$1
    shift
    local out="$tmp/out-$name" t0 t1 sp
    rm -rf "$out"
    rm -f "$tmp/$name.sample" "$tmp/$name.sample.stop"
    sampler "$tmp/$name.sample"
    sp=$!
    t0=$(date +%s.%N)
    "$LIS" batch --task "$tmp/task" --llm-name fake --llm-base-url "$URL" --api-key k \
        --rootfs "$R" --net none --scorer builtin:match --concurrency "$N" \
        ${MAX_CREATING:+--max-creating "$MAX_CREATING"} --output-dir "$out" --quiet --overcommit "$@" \
        >"$tmp/$name.log" 2>&1
    local rc=$?
    t1=$(date +%s.%N)
    touch "$tmp/$name.sample.stop"
    wait "$sp"
    python3 - "$out" "$tmp/$name.sample" "$rc" "$t0" "$t1" "$name" "$tmp/results.jsonl" <<'PY'
import glob, json, sys
out, sample, rc, t0, t1, name, res = sys.argv[1:8]
d = glob.glob(out + "/*/")[0]
steps = 0; fx = 0; ok = 0; n = 0
for p in glob.glob(d + "trajectories/*.json"):
    t = json.load(open(p))
    for s in t.get("steps", []):
        steps += 1
        fx += isinstance(s.get("effects"), dict)
for l in open(d + "results.jsonl"):
    r = json.loads(l); n += 1; ok += r.get("score") == 1
s = json.load(open(sample))
rec = {"side": name, "rc": int(rc), "wall": float(t1) - float(t0), "cpu": s["cpu"], "rss": s["rss"],
       "steps": steps, "steps_with_effects": fx, "episodes": n, "right": ok}
open(res, "a").write(json.dumps(rec) + "\n")
print("  %-4s wall %7.1f s, lis CPU %6.1f s (%.2f ms per step), RSS peak %6.1f MiB, %d episodes "
      "(%d right), %d steps, %d with effects" % (name, rec["wall"], rec["cpu"],
      rec["cpu"] / max(1, steps) * 1e3, rec["rss"] / 1048576, n, ok, steps, fx))
PY
}

echo "lis batch effects on vs --no-effects: N=$N at concurrency $N, reply latency ${LAT}s x 7, $ROUNDS rounds each, alternating"
echo "  rootfs $R, kernel $(uname -r), $(nproc) cores; $(uptime)"
for r in $(seq "$ROUNDS"); do
    run_side off --no-effects
    run_side on --effects
done
echo "  $(uptime)"
python3 - "$tmp/results.jsonl" "$N" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[2])
def med(side, f):
    v = sorted(f(r) for r in rows if r["side"] == side)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
for label, f, unit in [("wall time", lambda r: r["wall"], "s"),
                       ("lis CPU per step", lambda r: r["cpu"] / max(1, r["steps"]) * 1e3, "ms"),
                       ("lis RSS per live episode", lambda r: r["rss"] / n / 1048576, "MiB")]:
    on, off = med("on", f), med("off", f)
    print("  %-28s on %8.3f %-3s off %8.3f %-3s ratio %.3f%s" % (label, on, unit, off, unit,
          on / off if off else 0, " (goal <= 1.03)" if label == "wall time" else ""))
print("  effects on: %d of %d steps carry effects" % (
    sum(r["steps_with_effects"] for r in rows if r["side"] == "on"),
    sum(r["steps"] for r in rows if r["side"] == "on")))
PY
