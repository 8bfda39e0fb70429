#!/bin/bash
# Density of `lis batch`: N rows at concurrency N from one process, against the same work as N
# concurrent `lis run` processes, both against tests/fake_llm.py answering every request after a
# fixed latency (the model time), with a realistic tool mix per episode: a python3 computation,
# str_replace_editor create / view / str_replace, python3 on the edited file, a grep over the
# input documents, submit (6 LLM replies, 7 with submit).
#
#   scripts/bench-batch.sh [N]          default N=512
# Env: LIS (default build/lis), LATENCY (seconds per reply, default 5), ROOTFS (a directory;
#      default: the lis-agent:latest image when the store has it, else the Debian test fixture
#      built by scripts/make-test-rootfs.sh), ONLY=batch|run (one side only),
#      MAX_CREATING (lis batch --max-creating; default: lis's own, following the machine),
#      TOOLS=light (every command an echo, the editor calls kept: what the engine itself
#      costs, without the tools' CPU), TURNS=K (K < 7: K replies, the answer written, K-2
#      editor steps, submit; issue 24's density run is TOOLS=light TURNS=4).
#      BARE=0 skips the last part: the workload's bash commands run alone, N at once, as plain
#      processes (no sandbox, no lis), for the CPU they need on this machine.
#      ROOTFS may be a chain "top:...:base" (lis's --rootfs). BATCH_FLAGS: lis batch's extra
#      flags (default --overcommit; effects are on by default since issue 23: "--overcommit --no-effects"
#      measures without them, as issue 24's figures were; "" for a lis before issue 22).
# Prints one line per figure with the ratio against `lis run` x N; docs/benchmarks.md has runs.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
LIS=${LIS:-$top/build/lis}
N=${1:-512}
LAT=${LATENCY:-5}
tmp=$(mktemp -d /tmp/lis-bench-batch.XXXXXX)
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
if [ -z "$R" ] || [ ! -d "${R##*:}" ]; then
    R=${LIS_BENCH_ROOTFS:-/var/tmp/lis-bench-debian}
    [ -d "$R/usr/bin" ] || bash scripts/make-test-rootfs.sh debian "$R" >/dev/null || exit 1
fi
[ -x "${R##*:}/usr/bin/python3" ] || { echo "bench-batch: $R has no python3"; exit 1; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# the task: N rows, each with one input document to grep
mkdir -p "$tmp/task/in"
cat >"$tmp/task/config.yaml" <<'EOF'
dataset: json
data_files: data.jsonl
input_dir: /testbed/input
output_dir: /testbed/output
EOF
TURNS=${TURNS:-7}
python3 - "$tmp" "$N" "${TOOLS:-}" "$TURNS" <<'EOF'
import json, sys
tmp, n, light, turns = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "light", int(sys.argv[4])
doc = "\n".join("line %d of the notes" % i for i in range(200)) + "\nthe needle is here\n"
with open(tmp + "/task/data.jsonl", "w") as f:
    for i in range(n):
        f.write(json.dumps({"id": "b%04d" % i, "problem_statement": "ROW%04d compute it" % i,
                            "ground_truth": "333328333350000",
                            "input_files": {"notes.txt": doc}}) + "\n")
open(tmp + "/task/in/notes.txt", "w").write(doc)
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
if light:
    steps[0][1]["command"] = "echo 333328333350000"
    steps[4][1]["command"] = "mkdir -p /testbed/output && echo 333328333350000 > /testbed/output/answer.txt"
if turns < 7:  # the answer is written first, so a short episode still scores
    steps = [steps[4]] + steps[1:turns - 1] + [steps[6]]
json.dump({"latency": 5, "rows": {},
           "default": [{"calls": [s], "usage": [1000, 50]} for s in steps]},
          open(tmp + "/script.json", "w"))
EOF
python3 - "$tmp/script.json" "$LAT" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1])); s["latency"] = float(sys.argv[2]); json.dump(s, open(sys.argv[1], "w"))
EOF
python3 tests/fake_llm.py "$tmp/script.json" >"$tmp/port" 2>"$tmp/fake.err" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
URL="http://127.0.0.1:$(head -n1 "$tmp/port")/v1"
model_time=$(python3 -c "print($TURNS * $LAT)")

# samples MemAvailable, and the RSS + own CPU of the lis processes, every 0.5 s until told to stop
sampler() { # OUT PATTERN
    python3 - "$1" "$2" <<'EOF' &
import os, sys, time, json
out, pat = sys.argv[1], sys.argv[2]
tick = os.sysconf("SC_CLK_TCK")
def meminfo():
    m = {}
    for l in open("/proc/meminfo"):
        k, v = l.split(":", 1)
        m[k] = int(v.split()[0]) * 1024
    # what lis and its sandboxes hold: anonymous + kernel objects + tmpfs/shm (not page cache)
    return m["MemTotal"] - m["MemAvailable"], m["Slab"] + m["PageTables"] + m["KernelStack"] + m["Shmem"]
def median(a):
    a = sorted(a); return a[len(a) // 2]
b = [meminfo() for _ in range(5) if not time.sleep(0.1)]
base_used, base_kern = median([x[0] for x in b]), median([x[1] for x in b])
used_peak = base_used; kern_peak = base_kern; rss_peak = 0; cpu = {}; loop_cpu = 0; live_peak = 0
stop = out + ".stop"
while not os.path.exists(stop):
    u, k = meminfo(); used_peak = max(used_peak, u); kern_peak = max(kern_peak, k); rss = 0; n = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
            if len(cmd) < 2 or not cmd[0].endswith(b"/lis") or cmd[1].decode() != pat:
                continue
            st = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
            cpu[p] = (int(st[11]) + int(st[12])) / tick
            if pat == "batch":  # its event loop is the main thread; the pools are the others
                ts = open("/proc/%s/task/%s/stat" % (p, p)).read().rsplit(")", 1)[1].split()
                loop_cpu = max(loop_cpu, (int(ts[11]) + int(ts[12])) / tick)
            for l in open("/proc/%s/status" % p):
                if l.startswith("VmRSS:"):
                    rss += int(l.split()[1]) * 1024
            n += 1
        except (OSError, IndexError, ValueError):
            pass
    rss_peak = max(rss_peak, rss); live_peak = max(live_peak, n)
    time.sleep(0.5)
json.dump({"drop": used_peak - base_used, "kern": kern_peak - base_kern, "rss_peak": rss_peak,
           "cpu": sum(cpu.values()), "loop_cpu": loop_cpu, "procs": live_peak}, open(out, "w"))
EOF
}

# per-episode figures from trajectories: tool latency, memory peaks, failures
stats() { # DIR-GLOB-OF-TRAJECTORIES RESULTS.JSONL-or-empty
    python3 - "$@" <<'EOF'
import glob, json, sys
tools = []; steps = 0; peaks = []; fails = 0; n = 0
for p in glob.glob(sys.argv[1]):
    t = json.load(open(p)); n += 1
    for s in t.get("steps", []):
        steps += 1
        if s["action"]["function"] in ("execute_bash", "str_replace_editor"):
            tools.append(s["metadata"].get("tool_exec_time", 0))
    if t.get("metadata", {}).get("stop_reason") != "submit":
        fails += 1
if len(sys.argv) > 2 and sys.argv[2]:
    for l in open(sys.argv[2]):
        r = json.loads(l); peaks.append(r.get("memory_peak", 0))
        fails += r.get("score", 0) != 1
def pct(a, q):
    a = sorted(a); return a[min(len(a) - 1, int(q * len(a)))] if a else 0
print(json.dumps({"episodes": n, "replies": steps, "tool_p50": pct(tools, .5), "tool_p99": pct(tools, .99),
                  "peak_p50": pct(peaks, .5), "peak_p99": pct(peaks, .99), "fails": fails}))
EOF
}

# the host's busy CPU seconds so far (/proc/stat: all but idle and iowait)
host_busy() {
    awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2+$3+$4+$7+$8+$9)/hz; exit}' /proc/stat
}

# the workload's shell commands alone: the script's execute_bash commands, N at once, each
# in a directory of its own for /testbed, as plain processes of this shell (no sandbox, no
# lis, no model): the CPU the commands themselves need on this machine
run_bare() {
    python3 -c 'import json, sys
for turn in json.load(open(sys.argv[1]))["default"]:
    for name, args in turn["calls"]:
        if name == "execute_bash":
            print(args["command"])' "$tmp/script.json" >"$tmp/bare.cmds"
    local b0 b1 t0 t1 i ps=()
    b0=$(host_busy)
    t0=$(date +%s.%N)
    for i in $(seq 0 $((N - 1))); do
        mkdir -p "$tmp/bare/$i/input" && cp "$tmp/task/in/notes.txt" "$tmp/bare/$i/input/"
        (while IFS= read -r c; do bash -c "${c//\/testbed/$tmp/bare/$i}" >/dev/null 2>&1; done <"$tmp/bare.cmds") &
        ps+=($!)
    done
    for i in "${ps[@]}"; do wait "$i"; done
    t1=$(date +%s.%N)
    b1=$(host_busy)
    echo "{\"cpu\": $(python3 -c "print($b1 - $b0)"), \"wall\": $(python3 -c "print($t1 - $t0)")}" >"$tmp/bare.json"
}

run_batch() {
    sampler "$tmp/batch.sample" batch
    local sp=$! t0 t1 b0 b1
    b0=$(host_busy)
    t0=$(date +%s.%N)
    "$LIS" batch --task "$tmp/task" --llm-name fake --llm-base-url "$URL" --api-key k \
        --rootfs "$R" --net none --scorer builtin:match --concurrency "$N" \
        ${MAX_CREATING:+--max-creating "$MAX_CREATING"} --output-dir "$tmp/batch-out" --quiet \
        ${BATCH_FLAGS---overcommit} >"$tmp/batch.log" 2>&1
    local rc=$?
    t1=$(date +%s.%N)
    b1=$(host_busy)
    touch "$tmp/batch.sample.stop"; wait "$sp"
    local d; d=$(ls -d "$tmp"/batch-out/*/ | head -n1)
    echo "{\"rc\": $rc, \"wall\": $(python3 -c "print($t1 - $t0)"), \"host_cpu\": $(python3 -c "print($b1 - $b0)"), \"sample\": $(cat "$tmp/batch.sample"), \"eps\": $(stats "$d/trajectories/*.json" "$d/results.jsonl")}" >"$tmp/batch.json"
}

run_procs() {
    sampler "$tmp/run.sample" run
    local sp=$! t0 t1 i runs=()
    t0=$(date +%s.%N)
    for i in $(seq 0 $((N - 1))); do
        "$LIS" run --query "$(printf 'ROW%04d compute it' "$i")" --llm-name fake \
            --llm-base-url "$URL" --api-key k --rootfs "$R" --net none \
            --input-dir "$tmp/task/in" --output-dir "$tmp/run-out/$i" >/dev/null 2>&1 &
        runs+=($!)
    done
    for p in "${runs[@]}"; do wait "$p"; done
    t1=$(date +%s.%N)
    touch "$tmp/run.sample.stop"; wait "$sp"
    echo "{\"rc\": 0, \"wall\": $(python3 -c "print($t1 - $t0)"), \"sample\": $(cat "$tmp/run.sample"), \"eps\": $(stats "$tmp/run-out/*/*/trajectory.json" "")}" >"$tmp/run.json"
}

echo "lis batch density: N=$N at concurrency $N, reply latency ${LAT}s x $TURNS = ${model_time}s model time per episode, tools ${TOOLS:-mixed},"
echo "  load $(cut -d' ' -f1-3 /proc/loadavg), lis $LIS"
echo "  rootfs $R, kernel $(uname -r), $(nproc) cores, $(grep -q ':memory:' /proc/self/cgroup && echo 'memory on cgroup v1 (lis: fallback limits)' || echo 'cgroup v2')"
[ "${ONLY:-}" != run ] && run_batch
[ "${ONLY:-}" != batch ] && run_procs
[ "${BARE:-1}" = 1 ] && run_bare
python3 - "$tmp" "$N" "$model_time" "${ONLY:-}" <<'EOF'
import json, os, sys
tmp, n, model, only = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
res = {k: json.load(open("%s/%s.json" % (tmp, k))) for k in ("batch", "run") if os.path.exists("%s/%s.json" % (tmp, k))}
def line(name, f, unit, better="lower"):
    b = f(res["batch"]) if "batch" in res else None
    r = f(res["run"]) if "run" in res else None
    ratio = " (%.2fx of lis run x%d)" % (b / r, n) if b is not None and r else ""
    fmt = lambda v: "-" if v is None else ("%.2f %s" % (v, unit))
    print("  %-44s batch %-14s lis run x%d %-14s%s" % (name, fmt(b), n, fmt(r), ratio))
MB = 1048576.0
line("memory in use, peak rise per episode", lambda x: x["sample"]["drop"] / n / MB, "MiB")
line("  of it kernel (slab, page tables, shmem)", lambda x: x["sample"]["kern"] / n / MB, "MiB")
line("lis process RSS per episode (peak)", lambda x: x["sample"]["rss_peak"] / n / MB, "MiB")
line("lis process CPU (own, all episodes)", lambda x: x["sample"]["cpu"], "s")
line("lis process CPU per LLM reply", lambda x: x["sample"]["cpu"] / max(1, x["eps"]["replies"]) * 1000, "ms")
line("replies per second", lambda x: x["eps"]["replies"] / x["wall"], "/s")
line("tool latency p50", lambda x: x["eps"]["tool_p50"] * 1000, "ms")
line("tool latency p99", lambda x: x["eps"]["tool_p99"] * 1000, "ms")
line("wall time", lambda x: x["wall"], "s")
line("wall time / model time", lambda x: x["wall"] / model, "x")
line("episodes not submitted or wrong", lambda x: float(x["eps"]["fails"] + (n - x["eps"]["episodes"])), "")
cores = os.cpu_count() or 1
if "batch" in res and "host_cpu" in res["batch"]:
    hc = res["batch"]["host_cpu"]
    print("  batch: the host's CPU busy during the run %.1f s of %.1f s (%d cores x the wall time); "
          "that CPU alone needs %.1f s of wall time = %.2fx the model time (a floor for this host)"
          % (hc, cores * res["batch"]["wall"], cores, hc / cores, hc / cores / model))
if os.path.exists(tmp + "/bare.json"):
    b = json.load(open(tmp + "/bare.json"))
    print("  the workload's bash commands alone (no sandbox, no lis, no model; %d at once on the host): "
          "%.1f s of host CPU (%.1f ms per episode), %.1f s wall" % (n, b["cpu"], 1000 * b["cpu"] / n, b["wall"]))
if "batch" in res:
    e = res["batch"]["eps"]
    lc = res["batch"]["sample"]["loop_cpu"]
    print("  batch: event loop thread %.2f s CPU = %.2f ms per reply = %.1f%% of a core at %.0f replies/s "
          "(the rest: the set-up and misc pools creating, preparing and destroying sandboxes)"
          % (lc, lc / max(1, e["replies"]) * 1000, 100 * lc / res["batch"]["wall"], e["replies"] / res["batch"]["wall"]))
    print("  batch: per-sandbox memory peak p50 %.1f MiB, p99 %.1f MiB (lis_stats; fallback limits "
          "report the RSS sum seen by the commands); %.0f%% of a core at %.0f replies/s"
          % (e["peak_p50"] / MB, e["peak_p99"] / MB,
             100 * res["batch"]["sample"]["cpu"] / res["batch"]["wall"], e["replies"] / res["batch"]["wall"]))
EOF
