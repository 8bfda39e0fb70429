# ci-test-rl.sh - sourced by ci-test.sh once its cluster is up (issue 31, item 3): RL rollouts
# over two `lis serve` services started by scripts/slurm/lis-serve.sbatch (one srun step of two
# tasks on the one node: each its own port, its own node-local state, one CA made once), a
# trainer spreading groups over them with lis.Cluster, one service killed halfway: every group
# of the step ends exactly once. Uses ci-test.sh's as_user, ok, bad, logs, $work, $user, $tmo.

echo "== 3: lis serve on every task of an allocation; a trainer's groups over two services, one killed"
rl=$work/rl
mkdir -p "$rl"
cp -r "$top/python" "$work/python"
# every episode: two model turns a second apart (so that groups are in flight when the kill
# comes), the answer written, then submit; the scorer matches "ok"
cat >"$work/rl.json" <<'JSON'
{"latency": 1.0, "rows": {}, "default": [
  {"calls": [["execute_bash", {"command": "mkdir -p /testbed/output && echo ok > /testbed/output/answer.txt"}]]},
  {"calls": [["execute_bash", {"command": "cat /testbed/output/answer.txt"}]]},
  {"calls": [["submit", {}]]}]}
JSON
chown -R "$user:$user" "$rl" "$work/python" "$work/rl.json"
start_fake rl
rlurl=$url
# a port pair nothing listens on (the two tasks take PORT and PORT+1)
port=$(python3 -c 'import socket
for p in range(23760, 24760, 2):
    ok = True
    for q in (p, p + 1):
        s = socket.socket()
        try: s.bind(("0.0.0.0", q))
        except OSError: ok = False
        s.close()
    if ok: print(p); break')
sjob=$(as_user env LIS_SERVE_PORT="$port" LIS_SLURM_DIR="$work/slurm" LIS_BIN="$work/build/lis" \
    LIS_IMAGE_ARCHIVE="$work/busybox.tar" LIS_IMAGE_NAME=lis-ci-rl \
    sbatch --parsable --nodes=1 --ntasks=2 --cpus-per-task=1 --output="$work/serve-%j.out" \
    "$work/slurm/lis-serve.sbatch" "$rl" --rl-max-live 6 --net none 2>&1)
if [[ ! "$sjob" =~ ^[0-9]+$ ]]; then
    bad "sbatch lis-serve.sbatch" "$sjob"
else
    for _ in $(seq "$tmo"); do
        [ -f "$rl/endpoints.json" ] && break
        [ "$(jobstate "$sjob")" = RUNNING ] || [ "$(jobstate "$sjob")" = PENDING ] || break
        sleep 1
    done
    if python3 - "$rl/endpoints.json" "$port" "$rl/job-$sjob/tls" <<'PY' 2>/dev/null; then
import json, sys
d = json.load(open(sys.argv[1]))
p = int(sys.argv[2])
assert d["endpoints"] == ["tcp://127.0.0.1:%d" % p, "tcp://127.0.0.1:%d" % (p + 1)], d
assert d["cert_path"] == sys.argv[3], d
PY
        ok "one srun step of 2 tasks: 2 lis serve with mutual TLS, one CA, the endpoints file written once both answered"
    else
        bad "the endpoints file of job $sjob" "$(cat "$rl/endpoints.json" 2>&1)" \
            "$(cat "$work/serve-$sjob.out" "$rl"/job-*/task-*.log 2>&1 | tail -n 30)" "$(logs)"
    fi
    # a second local user reaches the ports but not the services: no certificate, no answer
    if id lis-test-b >/dev/null 2>&1; then
        other=lis-test-b
    else
        other=lis-slurm-b
        id "$other" >/dev/null 2>&1 || useradd -m -s /bin/bash "$other"
    fi
    msg=$(runuser -u "$other" -- python3 - "$port" "$rl/job-$sjob/tls" <<'PY' 2>&1
import os, socket, ssl, sys
port, tls = int(sys.argv[1]), sys.argv[2]
for f in ("key.pem", "server-key.pem", "ca.pem"):
    try:
        open(os.path.join(tls, f)).read()
        sys.exit("read %s of another user" % f)
    except OSError:
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))
try:
    s.sendall(b"GET /lis/v1/rl/status HTTP/1.1\r\nHost: x\r\n\r\n")
    got = s.recv(100)
    if got.startswith(b"HTTP/"):
        sys.exit("answered without a client certificate: %r" % got)
except (ssl.SSLError, OSError):
    pass
PY
    )
    [ $? -eq 0 ] && ok "a second local user ($other) cannot read the job's keys nor be answered without a client certificate" ||
        bad "a second local user against the services" "$msg"

    # the trainer: 8 groups of 2 over both; once both run episodes, task 1's lis serve is killed
    out=$(as_user timeout "$tmo" python3 - "$rl/endpoints.json" "$rlurl" "$(id -u "$user")" "$sjob" <<'PY' 2>&1
import json, os, signal, subprocess, sys, threading, time
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
import lis
epfile, url, uid, job = sys.argv[1:5]
c = lis.Cluster(endpoints_file=epfile)
eps = json.load(open(epfile))["endpoints"]
victim = eps[1]
bodies = [{"task": {"image": "lis-ci-rl", "prompt": "RL%d: write ok" % i,
                    "answer_file": "/testbed/output/answer.txt",
                    "reward": {"scorer": "builtin:match", "ground_truth": "ok"}},
           "n": 2, "inference": {"base_url": url, "model": "fake", "api_key": "k"},
           "max_steps": 5, "labels": {"i": i}} for i in range(8)]
killed = {}
def killer():
    while True:  # both services running episodes: then the second dies as a node would
        st = c.status()
        if all(s["ok"] and (s["status"]["episodes"].get("running") or 0) > 0 for s in st):
            break
        time.sleep(0.2)
    state = r"/lis-serve-%s-%s-1\.[^/]*/run/lis\.sock" % (uid, job)
    r = subprocess.run(["pkill", "-KILL", "-f", state])
    killed["t"], killed["rc"] = time.time(), r.returncode
threading.Thread(target=killer, daemon=True).start()
step = c.collect(bodies, deadline_s=240)
assert killed.get("rc") == 0, "the kill did not happen: %r" % killed
assert len(step) == 8 and [g.index for g in step] == list(range(8)), [g.index for g in step]
bad = [(g.index, g.error, g.done) for g in step if g.error is not None or not g.done]
assert not bad, "groups not done: %r" % bad
for g in step:
    assert g.labels == {"i": g.index}, (g.index, g.labels)
    assert len(g.episodes) == 2 and all(e.get("status") == "completed" for e in g.episodes), g.episodes
    assert g.rewards == [1.0, 1.0], (g.index, g.rewards)
moved = [g for g in step if g.retries]
assert moved, "no group was retried after the kill"
for g in moved:
    assert g.retries[0]["endpoint"] == victim and g.endpoint != victim, (g.retries, g.endpoint)
# exactly once: the survivor holds as many groups as results name it (no second copy made)
alive = [s for s in c.status() if s["ok"]]
assert [s["endpoint"] for s in alive] == [eps[0]], alive
held = sum(alive[0]["status"]["groups"].values())
named = sum(1 for g in step if g.endpoint == eps[0])
assert held == named, "the survivor holds %d groups, %d results name it" % (held, named)
print("groups %d, on the survivor %d, retried %d, before the kill on the victim %d"
      % (len(step), named, len(moved), sum(1 for g in step if g.endpoint == victim)))
PY
    )
    rc=$?
    [ $rc -eq 0 ] && ok "8 groups over 2 services, one killed halfway: each ended once ($out)" ||
        bad "the trainer over two services (exit $rc)" "$out" "$(tail -n 20 "$rl"/job-*/task-*.log 2>&1)"

    # scancel ends the job: the survivor stops, every task's state goes, the file is removed
    SLURM_CONF=$conf scancel "$sjob" >/dev/null 2>&1
    for _ in $(seq 60); do
        s=$(jobstate "$sjob")
        [ "$s" != RUNNING ] && [ "$s" != COMPLETING ] && break
        sleep 1
    done
    # no server and no sandbox (lis-init is each sandbox's first process), the killed one's too
    left=$(pgrep -u "$user" -f "lis serve|lis-init" 2>/dev/null | tr '\n' ' ')
    states=$(ls -d /tmp/lis-serve-"$(id -u "$user")"-"$sjob"-* 2>/dev/null)
    if [ -z "$left" ] && [ -z "$states" ] && [ ! -e "$rl/endpoints.json" ]; then
        ok "scancel: no lis serve and no sandbox of $user left, the tasks' node-local state and endpoints.json removed"
    else
        bad "after scancel" "processes: $left" "states: $states" "$(ls -la "$rl" 2>&1)"
    fi
fi
