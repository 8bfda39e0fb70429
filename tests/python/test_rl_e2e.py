"""The episodes API of `lis serve` (docs/rl.md, issue 30) end to end: a real
server as the unprivileged test user, real sandboxes of the Debian fixture, and
the scripted endpoint tests/fake_llm.py answering with token ids and logprobs
(its token mode) as vLLM does. Spoken to with raw HTTP over the unix socket,
so that the server's replies are checked byte for byte, not the client's."""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import IMAGE, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "..", "fake_llm.py")


class _Unix(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def api(server, method, path, body=None, headers=None, raw=None):
    c = _Unix(server.sock)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Content-Type": "application/json"} if data is not None else {}
    h.update(headers or {})
    c.request(method, "/lis/v1/" + path, body=data, headers=h)
    r = c.getresponse()
    text = r.read()
    c.close()
    try:
        doc = json.loads(text) if text else None
    except ValueError:
        doc = text
    return r.status, doc


class Fake:
    """tests/fake_llm.py in conversation mode, its requests logged."""

    def __init__(self, tmp, script):
        self.tmp = tmp
        self.log = os.path.join(tmp, "requests.jsonl")
        path = os.path.join(tmp, "script.json")
        with open(path, "w") as f:
            json.dump(script, f)
        self.proc = subprocess.Popen([sys.executable, FAKE, path, self.log],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.port = int(self.proc.stdout.readline())
        self.url = "http://127.0.0.1:%d/v1" % self.port

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def fake_factory():
    made = []

    def make(script):
        tmp = tempfile.mkdtemp(prefix="lis-rl-fake-")
        f = Fake(tmp, script)
        made.append(f)
        return f
    yield make
    for f in made:
        f.stop()


def bash(cmd):
    return {"calls": [["execute_bash", {"command": cmd}]]}


SUBMIT = {"calls": [["submit", {}]]}
TOKENS = {"return_token_ids": True, "logprobs": True, "temperature": 1.0}


def group(fake, prompt, n=1, **kw):
    body = {"task": {"image": IMAGE, "prompt": prompt},
            "n": n, "inference": {"base_url": fake.url, "model": "policy", "sampling": TOKENS}}
    for k, v in kw.items():
        if k in ("files", "setup", "reward", "answer_file"):
            body["task"][k] = v
        elif k in ("seeds",):
            body["inference"][k] = v
        else:
            body[k] = v
    return body


def results(server, gid, wait=300):
    st, doc = api(server, "GET", "groups/%s/results?wait=%d" % (gid, wait))
    assert st == 200, doc
    return doc


def submit(server, body):
    st, doc = api(server, "POST", "groups", body)
    assert st == 202, doc
    return doc


def test_rl_tokens_round_trip_and_reward(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [
        bash("echo 42 > /testbed/answer.txt"), bash("cat /testbed/answer.txt"), SUBMIT]}})
    g = submit(server, group(fake, "What is 6*7?", labels={"global_step": 3},
                             reward={"scorer": "builtin:match", "ground_truth": "42"}))
    doc = results(server, g["group_id"])
    assert doc["done"] is True
    (r,) = doc["episodes"]
    assert r["status"] == "completed", r
    assert r["filter"] is False and r["reward"] == 1.0
    assert r["reward_info"]["scorer"] == "builtin:match"
    assert r["labels"] == {"global_step": 3}
    assert [t["step"] for t in r["turns"]] == [0, 1, 2]
    tok = r["tokens"]
    assert tok["consistent"] is True, tok
    n = len(tok["response_ids"])
    assert n > 0 and len(tok["response_mask"]) == n and len(tok["response_logprobs"]) == n
    # the model's tokens are exactly the turns' own ids, in order, mask 1 on them
    model_ids = [i for t in r["turns"] for i in t["tokens"]["ids"]]
    assert [i for i, m in zip(tok["response_ids"], tok["response_mask"]) if m] == model_ids
    assert sum(tok["response_mask"]) == len(model_ids) < n  # observations between turns
    assert tok["prompt_ids"] == r["turns"][0]["tokens"]["prompt_ids"]
    assert all(lp == 0.0 for lp, m in zip(tok["response_logprobs"], tok["response_mask"]) if not m)
    reqs = fake.requests()
    assert len(reqs) == 3
    assert all(q["body"].get("return_token_ids") is True and q["body"].get("logprobs") is True
               for q in reqs)
    for k in ("queue_s", "setup_s", "run_s", "reward_s"):
        assert r["timing"][k] >= 0
    # the messages in the original's trajectory format
    assert r["messages"][0]["role"] == "system" and r["messages"][1]["role"] == "user"


def test_rl_drifted_prefix_is_reported_not_spliced(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [
        dict(bash("echo a"), reasoning="thinking hard"), bash("echo b"),
        dict(bash("echo c"), drift=True), SUBMIT]}})
    g = submit(server, group(fake, "drift"))
    (r,) = results(server, g["group_id"])["episodes"]
    tok = r["tokens"]
    assert tok["consistent"] is False, tok
    assert len(tok["segments"]) >= 2, tok
    first, last = tok["segments"][0]
    assert first == 0 and last < len(r["turns"]) - 1
    # never an id the endpoint did not send: the top level holds the first segment only
    seg_ids = [i for t in r["turns"][first:last + 1] for i in t["tokens"]["ids"]]
    assert [i for i, m in zip(tok["response_ids"], tok["response_mask"]) if m] == seg_ids


def test_rl_group_set_up_once_forked_isolated_seeded(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [
        bash("cat /testbed/counter; ls /testbed/mine-* 2>/dev/null | wc -l; "
             "touch /testbed/mine-$(cat /proc/sys/kernel/random/uuid)"),
        bash("cp /testbed/counter /testbed/answer.txt"), SUBMIT]}})
    g = submit(server, group(fake, "count", n=3, seeds=[11, 12, 13],
                             files={"in.txt": "input\n"},
                             setup=["echo $(( $(cat /testbed/counter 2>/dev/null || echo 0) + 1 ))"
                                    " > /testbed/counter", "test -f /testbed/input/in.txt"],
                             reward={"scorer": "builtin:match", "ground_truth": "1"}))
    doc = results(server, g["group_id"])
    eps = doc["episodes"]
    assert [e["index"] for e in eps] == [0, 1, 2]
    for e in eps:
        assert e["status"] == "completed", e
        assert e["reward"] == 1.0, e  # the set-up ran once: the counter is 1 in each fork
        obs = e["turns"][0]["observation"]
        assert "\n0\n" in obs or obs.split("\n")[1].strip() == "0", obs  # no other's file
    seeds = sorted({q["body"].get("seed") for q in fake.requests()})
    assert seeds == [11, 12, 13]


def test_rl_straggler_is_listed_running(server, fake_factory):
    fake = fake_factory({"mode": "openai", "seeds": {"2": [dict(bash("sleep 8"))]},
                         "rows": {"default": [bash("true"), SUBMIT]}})
    g = submit(server, group(fake, "straggle", n=2, seeds=[1, 2]))
    gid = g["group_id"]
    assert wait_until(lambda: results(server, gid, wait=0)["episodes"][0]["status"] == "completed",
                      120)
    doc = results(server, gid, wait=1)
    assert doc["done"] is False
    st = {e["episode_id"]: e["status"] for e in doc["episodes"]}
    assert st[g["episode_ids"][0]] == "completed"
    assert st[g["episode_ids"][1]] in ("running", "setup")
    assert results(server, gid)["done"] is True


def descendants(pid):
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    kids = {}
    for line in out.split("\n"):
        if line.strip():
            p, pp = map(int, line.split())
            kids.setdefault(pp, []).append(p)
    seen, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            seen.append(k)
            todo.append(k)
    return seen


def test_rl_deadline_and_cancel_keep_turns_and_leak_nothing(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [
        bash("echo first"), bash("sleep 600"), SUBMIT]}})
    before = len(descendants(server.proc.pid))
    a = submit(server, group(fake, "deadline", deadline_s=25))
    b = submit(server, group(fake, "cancel"))
    eb = b["episode_ids"][0]
    assert wait_until(lambda: api(server, "GET", "episodes/" + eb)[1].get("turns_done", 0) >= 1
                      or api(server, "GET", "episodes/" + eb)[1]["status"] != "running", 120)
    time.sleep(1)  # into the sleep of turn 1
    st, doc = api(server, "POST", "episodes/%s/cancel" % eb)
    assert st == 200
    st, doc = api(server, "POST", "episodes/%s/cancel" % eb)  # idempotent
    assert st == 200
    rb = results(server, b["group_id"])["episodes"][0]
    assert rb["status"] == "cancelled" and rb["error_stage"] == "run", rb
    assert rb["reward"] is None
    assert len(rb["turns"]) >= 1 and rb["turns"][0]["observation"].find("first") >= 0
    ra = results(server, a["group_id"])["episodes"][0]
    assert ra["status"] == "timeout" and ra["error_stage"] == "run", ra
    assert len(ra["turns"]) >= 1
    # nothing of them is left: sandboxes, processes, snapshots
    assert wait_until(lambda: api(server, "GET", "rl/status")[1]["sandboxes"] == 0, 60)
    assert wait_until(lambda: api(server, "GET", "rl/status")[1]["snapshots"] == 0, 60)
    assert wait_until(lambda: len(descendants(server.proc.pid)) <= before, 60), \
        descendants(server.proc.pid)


def test_rl_branch_at_step_2_keeps_turns_and_files(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [
        bash("touch /testbed/f0"), bash("touch /testbed/f1"),
        bash("ls /testbed; touch /testbed/f2"), bash("ls /testbed"), SUBMIT]}})
    g = submit(server, group(fake, "branch", keep_snapshots="every_step"))
    parent = results(server, g["group_id"])["episodes"][0]
    assert parent["status"] == "completed", parent
    pid = parent["episode_id"]
    st, doc = api(server, "POST", "episodes/%s/branch" % pid,
                  {"at_step": 2, "n": 2, "sampling": dict(TOKENS, temperature=0.5)})
    assert st == 202, doc
    kids = results(server, doc["group_id"])["episodes"]
    assert len(kids) == 2
    for k in kids:
        assert k["status"] == "completed", k
        assert k["branch_of"] == {"episode_id": pid, "at_step": 2}
        assert json.dumps(k["turns"][:2], sort_keys=True) == \
            json.dumps(parent["turns"][:2], sort_keys=True)
        obs = k["turns"][2]["observation"]
        assert "f0" in obs and "f1" in obs and "f2" not in obs, obs
    # the children's own requests carried their sampling
    assert any(q["body"].get("temperature") == 0.5 for q in fake.requests())
    st, doc = api(server, "POST", "episodes/%s/branch" % pid, {"at_step": 9, "n": 1})
    assert st == 409 and "turns" in doc["message"]
    for e in [pid] + [k["episode_id"] for k in kids]:
        assert api(server, "DELETE", "episodes/" + e)[0] == 200
    assert wait_until(lambda: api(server, "GET", "rl/status")[1]["snapshots"] == 0, 60)


def test_rl_events_stream_ids_and_resume(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [bash("echo x"), SUBMIT]}})
    g = submit(server, group(fake, "events"))
    e = g["episode_ids"][0]
    c = _Unix(server.sock)
    c.request("GET", "/lis/v1/episodes/%s/events" % e)
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream")
    body = r.read().decode()
    c.close()
    evs = [dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
           for block in body.strip().split("\n\n") if block.strip()]
    ids = [int(v["id"]) for v in evs]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert [v["event"] for v in evs].count("final") == 1 and evs[-1]["event"] == "final"
    final = json.loads(evs[-1]["data"])
    assert final == api(server, "GET", "episodes/" + e)[1]
    c = _Unix(server.sock)
    c.request("GET", "/lis/v1/episodes/%s/events" % e, headers={"Last-Event-ID": str(ids[-2])})
    rest = c.getresponse().read().decode()
    c.close()
    assert rest.count("event: ") == 1 and "event: final" in rest


def test_rl_hostile_bodies_get_one_line_4xx_and_change_nothing(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [SUBMIT]}})
    before = api(server, "GET", "rl/status")[1]
    ok = group(fake, "x")
    cases = [
        (dict(ok, bogus=1), 400, "bogus"),
        (dict(ok, task=dict(ok["task"], fles={})), 400, "task.fles"),
        (dict(ok, n=100000), 422, "n"),
        (dict(ok, task=dict(ok["task"], files={"big": "x" * (65 << 20)})), 413, ""),
        ([], 400, ""),
    ]
    for body, want, word in cases:
        st, doc = api(server, "POST", "groups", body)
        assert st == want, (st, doc)
        assert "\n" not in doc["message"] and word in doc["message"], doc
    st, doc = api(server, "POST", "groups", raw=b"{not json")
    assert st == 400
    after = api(server, "GET", "rl/status")[1]
    assert after["episodes"] == before["episodes"] and after["groups"] == before["groups"]


def test_rl_reward_command_that_never_ends(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [
        bash("echo 1 > /testbed/answer.txt"), SUBMIT]}})
    g = submit(server, group(fake, "slow reward",
                             reward={"scorer": "cmd:sleep 600", "timeout_s": 2}))
    (r,) = results(server, g["group_id"])["episodes"]
    assert r["reward"] == 0 and r["error_stage"] == "reward", r
    assert "timed out" in r["error"] and r["filter"] is False


def test_rl_request_id_is_idempotent(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [SUBMIT]}})
    body = group(fake, "idem", request_id="step1-task7")
    a = submit(server, body)
    st, b = api(server, "POST", "groups", body)
    assert st == 200 and b == a
    results(server, a["group_id"])


def test_rl_restart_keeps_finished_results(server, fake_factory):
    """A finished result outlives its server: the next one on the same store
    answers it (and its group's results) from disk. With --rl-results-mem 1 the
    older of two finished groups leaves memory and is read back from disk."""
    from conftest import new_server
    fake = fake_factory({"mode": "openai", "rows": {"default": [
        bash("echo 7 > /testbed/answer.txt"), SUBMIT]}})
    s = new_server("lis-rl-restart-", ["--rl-results-mem", "1"])
    try:
        g = submit(s, group(fake, "restart", reward={"scorer": "builtin:match",
                                                     "ground_truth": "7"}))
        first = results(s, g["group_id"])["episodes"][0]
        assert first["status"] == "completed" and first["reward"] == 1.0, first
        g2 = submit(s, group(fake, "second"))
        assert results(s, g2["group_id"])["done"] is True
        # the first group left memory (one finished episode kept): read back from disk
        assert wait_until(lambda: api(s, "GET", "rl/status")[1]["episodes"]["done"] == 1, 30)
        assert api(s, "GET", "episodes/" + first["episode_id"]) == (200, first)
        assert results(s, g["group_id"], wait=0)["episodes"] == [first]
        assert s.stop() == 0
        s.start()
        st, again = api(s, "GET", "episodes/" + first["episode_id"])
        assert st == 200 and again == first
        doc = results(s, g["group_id"], wait=0)
        assert doc["done"] is True and doc["episodes"] == [first]
        assert api(s, "DELETE", "episodes/" + first["episode_id"])[0] == 200
        assert api(s, "GET", "episodes/" + first["episode_id"])[0] == 404
    finally:
        if s.proc and s.proc.poll() is None:
            s.stop()
        s.remove_store()


def test_rl_inference_swap_stamps_later_turns(server, fake_factory):
    """PUT rl/inference: later turns go to the new endpoints (least outstanding first)
    and carry the weight version; an empty list goes back to the group's own."""
    own = fake_factory({"mode": "openai", "rows": {"default": [SUBMIT]}})
    new_a = fake_factory({"mode": "openai", "latency": 0.5,
                          "rows": {"default": [bash("true"), SUBMIT]}})
    new_b = fake_factory({"mode": "openai", "latency": 0.5,
                          "rows": {"default": [bash("true"), SUBMIT]}})
    st, doc = api(server, "PUT", "rl/inference",
                  {"endpoints": [{"base_url": new_a.url, "model": "p2"},
                                 {"base_url": new_b.url, "model": "p2"}],
                   "weight_version": "v13"})
    assert st == 200 and doc["weight_version"] == "v13", doc
    assert [e["base_url"] for e in doc["endpoints"]] == [new_a.url, new_b.url]
    try:
        g = submit(server, group(own, "swapped", n=2))
        eps = results(server, g["group_id"])["episodes"]
        for e in eps:
            assert e["status"] == "completed", e
            assert e["weight_versions"] == ["v13"]
            assert all(t["weight_version"] == "v13" for t in e["turns"])
        assert own.requests() == []  # nothing went to the group's own endpoint
        a, b = new_a.requests(), new_b.requests()
        assert len(a) + len(b) == 4 and a and b  # spread over both
        assert all(q["body"]["model"] == "p2" for q in a + b)
        st, doc = api(server, "PUT", "rl/inference", {"bogus": 1})
        assert st == 400 and "bogus" in doc["message"]
    finally:
        st, doc = api(server, "PUT", "rl/inference", {"endpoints": [], "weight_version": ""})
        assert st == 200 and doc["endpoints"] == []
    g = submit(server, group(own, "own again"))
    assert results(server, g["group_id"])["episodes"][0]["status"] == "completed"
    assert len(own.requests()) == 1
