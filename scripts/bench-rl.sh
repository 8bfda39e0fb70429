#!/bin/bash
# A GRPO-shaped step (issue 30): G groups x N episodes of one task each, 4 model turns and one
# set-up command per group, all requested at once, against tests/fake_llm.py answering every
# request after a fixed latency (the model time). The same episodes run four ways in one run:
#   serve  `lis serve`'s episodes API (docs/rl.md) through the Python client's Episodes.collect:
#          each group set up once (its set-up command) and forked into its N episodes;
#   batch  `lis batch` rows: G rows x --repeat N --fork-from-setup (the set-up's file given as
#          the row's input file, the part of a set-up lis batch has);
#   plain  no sandbox, no lis: a Python driver calling the endpoint and running each command with
#          subprocess in a directory of its own (the set-up run once per group, its directory
#          copied for each episode);
#   docker the original RL environment's way: docker-py on `lis serve`'s Docker API, a container
#          per episode (containers.run, the set-up and each command by exec_run, then remove),
#          the endpoint called from Python as in plain.
# Prints, per way: the wall time against the model time (4 x LATENCY), the time from the step's
# request to each episode's first model call (p50, p99: timestamped by a proxy in front of the
# fake endpoint, which logs nothing of the kind itself), set-up (+ fork) per group, memory per
# live episode (the peak rise of MemTotal - MemAvailable over a baseline, / G x N), and the
# ratios of serve against batch and plain.
#
#   scripts/bench-rl.sh [G] [N]        default 64 8 (512 episodes); scripts/bench-rl.sh 4 2 to try
# Env: LIS (default build/lis), LATENCY (seconds per reply, default 5), IMAGE (a tag of lis's
#      store; default lis-agent:latest when the store has it, else the Debian test fixture
#      imported as lis-bench-rl:debian), ONLY=serve,batch,plain,docker (a subset), SERVE_FLAGS (lis
#      serve's extra flags), BATCH_FLAGS (lis batch's; default --overcommit), DEADLINE (seconds,
#      the step's deadline, default 1800). Run as an unprivileged user.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
LIS=${LIS:-$top/build/lis}
G=${1:-64}
N=${2:-8}
LAT=${LATENCY:-5}
ONLY=${ONLY:-serve,batch,plain,docker}
[ "$(id -u)" != 0 ] || { echo "bench-rl: run as an unprivileged user (lis is rootless)"; exit 1; }
tmp=$(mktemp -d /tmp/lis-bench-rl.XXXXXX)
chmod 755 "$tmp"
export XDG_RUNTIME_DIR=$tmp/run XDG_DATA_HOME=${XDG_DATA_HOME:-$HOME/.local/share}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    "$LIS" sandbox gc >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null

. scripts/bench-lib/image.sh
IMG=${IMAGE:-}
if [ -z "$IMG" ]; then
    if "$LIS" rootfs inspect lis-agent:latest >/dev/null 2>&1; then
        IMG=lis-agent:latest
    else
        IMG=lis-bench-rl:debian
        bench_image "$LIS" "$IMG" "$tmp" || exit 1
    fi
fi

# the fake endpoint's script: the same 4 replies for every episode, whatever its prompt
python3 - "$tmp/script.json" "$LAT" <<'EOF'
import json, sys
turns = [["execute_bash", {"command": "awk '{s+=$1} END {print s}' /testbed/input/nums.txt"}],
         ["execute_bash", {"command": "mkdir -p /testbed/output && awk '{s+=$1} END {print s}' "
                                      "/testbed/input/nums.txt > /testbed/output/answer.txt"}],
         ["execute_bash", {"command": "cat /testbed/output/answer.txt"}],
         ["submit", {}]]
json.dump({"latency": float(sys.argv[2]), "rows": {},
           "default": [{"calls": [t], "usage": [1000, 50]} for t in turns]},
          open(sys.argv[1], "w"))
EOF
python3 tests/fake_llm.py "$tmp/script.json" >"$tmp/fake.port" 2>"$tmp/fake.err" &
pids+=($!)

# a proxy in front of it that timestamps every request: (time, way, group, step)
for _ in $(seq 50); do [ -s "$tmp/fake.port" ] && break; sleep 0.1; done
python3 scripts/bench-lib/stamp-proxy.py "$(head -n1 "$tmp/fake.port")" "$tmp/calls.jsonl" >"$tmp/proxy.port" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/proxy.port" ] && break; sleep 0.1; done
URL="http://127.0.0.1:$(head -n1 "$tmp/proxy.port")/v1"

SOCK=$tmp/run/lis.sock
if [[ ",$ONLY," == *,serve,* || ",$ONLY," == *,docker,* ]]; then
    # shellcheck disable=SC2086
    "$LIS" serve --socket "$SOCK" ${SERVE_FLAGS:-} >"$tmp/serve.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do [ -S "$SOCK" ] && break; sleep 0.05; done
fi

cat >"$tmp/driver.py" <<'EOF'
"""One way of running the step; writes TMP/WAY.json."""
import json, os, shutil, statistics, subprocess, sys, threading, time, urllib.request
way, tmp, top, G, N, url, image = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \
    int(sys.argv[5]), sys.argv[6], sys.argv[7]
sys.path.insert(0, os.path.join(top, "python"))
SETUP = "mkdir -p /testbed/input && seq 1 1000 > /testbed/input/nums.txt"
NUMS = "".join("%d\n" % i for i in range(1, 1001))
ANSWER = "500500"

def prompt(g):
    return "RL-%s-G%03d: what is the sum of the numbers in /testbed/input/nums.txt?" % (way, g)

def meminfo():
    m = {}
    for line in open("/proc/meminfo"):
        k, v = line.split(":", 1)
        m[k] = int(v.split()[0]) * 1024
    return m["MemTotal"] - m["MemAvailable"]

class Sampler(threading.Thread):
    """The peak rise of the memory in use over a baseline (the median of 5 samples before)."""
    def __init__(self, extra=None):
        super().__init__(daemon=True)
        self.base = statistics.median(meminfo() for _ in range(5) if not time.sleep(0.1))
        self.peak, self.stop, self.extra, self.extra_peak = self.base, threading.Event(), extra, {}
    def run(self):
        while not self.stop.wait(0.5):
            self.peak = max(self.peak, meminfo())
            if self.extra:
                try:
                    for k, v in self.extra().items():
                        self.extra_peak[k] = max(self.extra_peak.get(k, 0), v)
                except Exception:
                    pass

def serve():
    import lis
    eps = lis.Episodes(socket=os.path.join(tmp, "run", "lis.sock"), start=False)
    def status():
        s = eps.status()
        return {"sandboxes": s.get("sandboxes") or 0, "memory_bytes": s.get("memory_bytes") or 0}
    bodies = [{"request_id": "bench-rl-%d-%d" % (os.getpid(), g),
               "task": {"id": "g%03d" % g, "image": image, "setup": [SETUP], "prompt": prompt(g),
                        "answer_file": "/testbed/output/answer.txt",
                        "reward": {"scorer": "builtin:match", "ground_truth": ANSWER}},
               "n": N, "inference": {"base_url": url, "model": "fake", "api_key": "k",
                                     "seeds": list(range(N))},
               "max_steps": 10, "deadline_s": float(os.environ.get("DEADLINE", "1800")),
               "labels": {"group": g}} for g in range(G)]
    smp = Sampler(status)
    smp.start()
    t0 = time.time()
    step = eps.collect(bodies, deadline_s=float(os.environ.get("DEADLINE", "1800")) + 60)
    wall = time.time() - t0
    smp.stop.set()
    eps_all = [e for g in step for e in g.episodes]
    setup = [max((e.get("timing") or {}).get("setup_s") or 0 for e in g.episodes)
             for g in step if g.episodes]
    errors = sorted({"%s" % e for _, e in step.errors})
    for g in step:  # the server keeps finished results on disk until they are deleted
        for eid in g.episode_ids:
            try:
                eps.delete(eid)
            except lis.SandboxException:
                pass
    return {"t0": t0, "wall": wall, "mem": smp.peak - smp.base, "extra": smp.extra_peak,
            "episodes": len(eps_all), "completed": sum(e.get("status") == "completed" for e in eps_all),
            "rewarded": sum(e.get("reward") == 1.0 for e in eps_all), "setup": setup,
            "stragglers": len(step.stragglers), "errors": errors[:3]}

def batch():
    task = os.path.join(tmp, "task")
    os.makedirs(task, exist_ok=True)
    with open(os.path.join(task, "config.yaml"), "w") as f:
        f.write("dataset: json\ndata_files: data.jsonl\ninput_dir: /testbed/input\n"
                "output_dir: /testbed/output\n")
    with open(os.path.join(task, "data.jsonl"), "w") as f:
        for g in range(G):
            f.write(json.dumps({"id": "g%03d" % g, "problem_statement": prompt(g),
                                "ground_truth": ANSWER, "input_files": {"nums.txt": NUMS}}) + "\n")
    out = os.path.join(tmp, "batch-out")
    cmd = [os.environ["LIS"], "batch", "--task", task, "--llm-name", "fake", "--llm-base-url", url,
           "--api-key", "k", "--image", image, "--net", "none", "--scorer", "builtin:match",
           "--concurrency", str(G * N), "--repeat", str(N), "--fork-from-setup",
           "--output-dir", out, "--quiet"] + os.environ.get("BATCH_FLAGS", "--overcommit").split()
    smp = Sampler()
    smp.start()
    t0 = time.time()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.time() - t0
    smp.stop.set()
    rows = []
    for d in os.listdir(out) if os.path.isdir(out) else []:
        p = os.path.join(out, d, "results.jsonl")
        if os.path.exists(p):
            rows += [json.loads(l) for l in open(p) if l.strip()]
    return {"t0": t0, "wall": wall, "mem": smp.peak - smp.base, "episodes": len(rows),
            "completed": len(rows), "rewarded": sum(x.get("score") == 1 for x in rows), "setup": [],
            "stragglers": 0, "errors": [] if r.returncode == 0 else [r.stderr.strip()[-300:]]}

def react(g, run, answer):
    """The loop of a driver of its own: the endpoint called, each command run by run(cmd) ->
    (code, output); answer() reads the answer file at submit. The reward (1.0 or 0.0)."""
    msgs = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": prompt(g)}]
    for _ in range(10):
        req = urllib.request.Request(url + "/chat/completions", json.dumps(
            {"model": "fake", "messages": msgs}).encode(), {"Content-Type": "application/json"})
        msg = json.load(urllib.request.urlopen(req, timeout=600))["choices"][0]["message"]
        msgs.append(msg)
        call = (msg.get("tool_calls") or [{}])[0].get("function") or {}
        if call.get("name") == "submit":
            return float((answer() or "").strip() == ANSWER)
        code, out = run(json.loads(call.get("arguments") or "{}").get("command", "true"))
        msgs.append({"role": "tool", "tool_call_id": (msg.get("tool_calls") or [{}])[0].get("id"),
                     "content": "Exit code: %d\n%s" % (code, out)})
    return 0.0

def plain():
    setups, results, lock = [], [], threading.Lock()
    def episode(g, d):
        def run(cmd):
            p = subprocess.run(["bash", "-c", cmd.replace("/testbed", d)], capture_output=True,
                               text=True, timeout=120)
            return p.returncode, p.stdout + p.stderr
        def answer():
            try:
                return open(d + "/output/answer.txt").read()
            except OSError:
                return None
        reward = react(g, run, answer)
        with lock:
            results.append(reward)
    def group(g):
        t = time.time()
        base = os.path.join(tmp, "plain", "g%03d" % g, "base")
        os.makedirs(base)
        subprocess.run(["bash", "-c", SETUP.replace("/testbed", base)], check=True)
        dirs = []
        for i in range(N):  # the "fork": a copy of the set-up's directory
            dirs.append(os.path.join(tmp, "plain", "g%03d" % g, "e%d" % i))
            shutil.copytree(base, dirs[-1])
        with lock:
            setups.append(time.time() - t)
        ts = [threading.Thread(target=episode, args=(g, d)) for d in dirs]
        for x in ts:
            x.start()
        for x in ts:
            x.join()
    smp = Sampler()
    smp.start()
    t0 = time.time()
    gs = [threading.Thread(target=group, args=(g,)) for g in range(G)]
    for x in gs:
        x.start()
    for x in gs:
        x.join()
    wall = time.time() - t0
    smp.stop.set()
    return {"t0": t0, "wall": wall, "mem": smp.peak - smp.base, "episodes": len(results),
            "completed": len(results), "rewarded": sum(r == 1.0 for r in results),
            "setup": setups, "stragglers": 0, "errors": []}

def docker_py():
    """The original RL environment's way (its DockerRuntime): a container per episode through
    the Docker API (docker-py on lis serve's socket), the set-up and every command by exec_run."""
    import docker
    cli = docker.DockerClient(base_url="unix://" + os.path.join(tmp, "run", "lis.sock"),
                              max_pool_size=G * N + 8, timeout=600)
    setups, results, errors, lock = [], [], [], threading.Lock()
    def episode(g):
        c = None
        try:
            t = time.time()
            c = cli.containers.run(image, ["sleep", "infinity"], detach=True, network_mode="none")
            c.exec_run(["bash", "-c", SETUP])
            with lock:
                setups.append(time.time() - t)
            def run(cmd):
                r = c.exec_run(["bash", "-c", cmd], workdir="/testbed")
                return r.exit_code, (r.output or b"").decode("utf-8", "replace")
            def answer():
                r = c.exec_run(["cat", "/testbed/output/answer.txt"])
                return (r.output or b"").decode() if r.exit_code == 0 else None
            reward = react(g, run, answer)
            with lock:
                results.append(reward)
        except Exception as e:
            with lock:
                errors.append(str(e)[:300])
        finally:
            if c is not None:
                try:
                    c.remove(force=True)
                except Exception:
                    pass
    smp = Sampler()
    smp.start()
    t0 = time.time()
    ts = [threading.Thread(target=episode, args=(g,)) for g in range(G) for _ in range(N)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    wall = time.time() - t0
    smp.stop.set()
    return {"t0": t0, "wall": wall, "mem": smp.peak - smp.base, "episodes": len(results),
            "completed": len(results), "rewarded": sum(r == 1.0 for r in results),
            "setup": setups, "stragglers": 0, "errors": sorted(set(errors))[:3]}

res = {"serve": serve, "batch": batch, "plain": plain, "docker": docker_py}[way]()
json.dump(res, open(os.path.join(tmp, way + ".json"), "w"))
EOF

model_time=$(python3 -c "print(4 * $LAT)")
echo "GRPO-shaped step: $G groups x $N episodes, 4 turns x ${LAT}s = ${model_time}s model time per episode,"
echo "  one set-up command per group; load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, image $IMG, lis $LIS"
for way in serve batch plain docker; do
    [[ ",$ONLY," == *,$way,* ]] || continue
    LIS=$LIS python3 "$tmp/driver.py" "$way" "$tmp" "$top" "$G" "$N" "$URL" "$IMG" ||
        echo "bench-rl: the $way run failed"
    sleep 2 # what the last run freed, freed before the next baseline
done

python3 - "$tmp" "$G" "$N" "$model_time" <<'EOF'
import json, os, sys
tmp, G, N, model = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
WAYS = ("serve", "batch", "plain", "docker")
res = {w: json.load(open("%s/%s.json" % (tmp, w))) for w in WAYS
       if os.path.exists("%s/%s.json" % (tmp, w))}
calls = [json.loads(l) for l in open(tmp + "/calls.jsonl")] if os.path.exists(tmp + "/calls.jsonl") else []
def pct(a, q):
    a = sorted(a)
    return a[min(len(a) - 1, int(q * len(a)))] if a else None
MB = 1048576.0
for w, r in res.items():
    first = [c["t"] - r["t0"] for c in calls if c.get("way") == w and c.get("step") == 0]
    r["first_p50"], r["first_p99"] = pct(first, .5), pct(first, .99)
    r["first_n"] = len(first)
    r["setup_p50"], r["setup_p99"] = pct(r["setup"], .5), pct(r["setup"], .99)
    r["mem_ep"] = r["mem"] / (G * N) / MB
    r["ratio"] = r["wall"] / model
    if not r["episodes"]:  # nothing ran: no figure
        r["wall"] = r["ratio"] = r["mem_ep"] = None
def fmt(v, unit=""):
    return "-" if v is None else "%.2f%s" % (v, unit)
print("  %-40s %12s %12s %12s %12s" % ("", "serve", "batch", "plain", "docker-py"))
rows = [("wall time", "wall", "s"), ("wall time / model time", "ratio", "x"),
        ("first model call after the request, p50", "first_p50", "s"),
        ("first model call after the request, p99", "first_p99", "s"),
        ("set-up (+ fork) per group, p50", "setup_p50", "s"),
        ("set-up (+ fork) per group, p99", "setup_p99", "s"),
        ("memory per live episode (peak rise)", "mem_ep", " MiB")]
for name, k, u in rows:
    print("  %-40s %12s %12s %12s %12s" % (name, *(fmt(res[w].get(k), u) if w in res else "-"
                                                   for w in WAYS)))
for name, k in (("episodes finished / of them rewarded", None), ("first calls seen", "first_n")):
    vals = []
    for w in WAYS:
        if w not in res:
            vals.append("-")
        elif k:
            vals.append("%d" % res[w][k])
        else:
            vals.append("%d / %d" % (res[w]["completed"], res[w]["rewarded"]))
    print("  %-40s %12s %12s %12s %12s" % (name, *vals))
if "serve" in res and res["serve"]["episodes"]:
    s = res["serve"]
    print("  serve: peak sandboxes %s, peak memory_bytes %s (GET /lis/v1/rl/status), stragglers %d"
          % (s["extra"].get("sandboxes", "-"), fmt(s["extra"].get("memory_bytes", 0) / MB, " MiB"),
             s["stragglers"]))
    for other in ("batch", "plain", "docker"):
        if other in res and res[other]["wall"] and (res[other]["mem_ep"] or 0) > 0:
            print("  serve / %s: wall time %.2fx, memory per live episode %.2fx"
                  % (other, s["wall"] / res[other]["wall"], s["mem_ep"] / res[other]["mem_ep"]))
        elif other in res and res[other]["wall"]:
            print("  serve / %s: wall time %.2fx" % (other, s["wall"] / res[other]["wall"]))
for w, r in res.items():
    for e in r["errors"]:
        print("  %s: %s" % (w, e))
EOF
