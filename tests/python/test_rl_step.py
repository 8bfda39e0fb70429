"""Step mode of the episodes API (docs/rl.md "Step mode", issue 31): the
trainer calls the model and hands its turns to POST envs/ID/step. A real
server as the unprivileged test user, real sandboxes of the Debian fixture;
the same turns replayed through an episode driven by tests/fake_llm.py give
the byte-for-byte reference of what the model sees."""
import json
import time

from conftest import IMAGE
from test_rl_e2e import SUBMIT, api, bash, fake_factory, results, submit  # noqa: F401

# a command, a turn without a tool call (the continue message), a command
# past its timeout, binary output, a long output cut, then submit
TURNS = [bash("printf hello"), {"content": "Let me think about it first."},
         bash("sleep 5; echo late"), bash("printf 'a\\000b\\377\\376c\\n'"),
         bash("seq 1 300000"), SUBMIT]


def action(entry, step):
    """The assistant message tests/fake_llm.py sends for entry at step."""
    msg = {"role": "assistant", "content": entry.get("content")}
    calls = entry.get("calls") or []
    if calls:
        msg["tool_calls"] = [
            {"id": "call_%d_%d" % (step, k), "type": "function",
             "function": {"name": c[0], "arguments": json.dumps(c[1])}}
            for k, c in enumerate(calls)]
    return msg


def envs(server, task, **kw):
    body = {"task": task}
    body.update(kw)
    st, doc = api(server, "POST", "envs?wait=120", body)
    assert st == 200, doc
    return doc


def step(server, env, act):
    st, doc = api(server, "POST", "envs/%s/step" % env, {"action": act})
    assert st == 200, doc
    return doc


def split_by_turn(messages):
    """The history cut at each assistant message: what the model saw first,
    then what each turn added after its assistant message."""
    parts, cur = [], []
    for m in messages:
        if m.get("role") == "assistant":
            parts.append(cur)
            cur = []
        else:
            cur.append(m)
    parts.append(cur)
    return parts


def test_step_observations_are_the_episodes(server, fake_factory):
    prompt = "Replay the turns."
    fake = fake_factory({"mode": "openai", "rows": {"default": TURNS}})
    g = submit(server, {"task": {"image": IMAGE, "prompt": prompt}, "tool_timeout_s": 1,
                        "inference": {"base_url": fake.url, "model": "policy"}})
    (ref,) = results(server, g["group_id"])["episodes"]
    assert ref["status"] == "completed", ref
    want = split_by_turn(ref["messages"])
    assert len(want) == len(TURNS) + 1

    # no endpoint in step mode: refused, with the line that says why
    st, doc = api(server, "POST", "envs", {"task": {"image": IMAGE, "prompt": prompt},
                                           "inference": {"base_url": fake.url}})
    assert st == 400 and doc["message"] == "step mode: the trainer calls the model", doc

    e = envs(server, {"image": IMAGE, "prompt": prompt}, tool_timeout_s=1)
    (env,) = e["env_ids"]
    assert json.dumps(e["observation"]) == json.dumps(want[0])
    for k, entry in enumerate(TURNS):
        r = step(server, env, action(entry, k))
        assert json.dumps(r["observations"]) == json.dumps(want[k + 1]), (k, r)
        assert r["done"] is (k == len(TURNS) - 1), r
        assert {"step", "effects", "capability", "tool_s"} <= set(r["info"]), r
    assert r["info"]["stop_reason"] == "submit", r
    # the long output was cut (the same cut in both)
    assert len(json.dumps(want)) < 300000
    # done: no more steps; its result is any episode's
    st, doc = api(server, "POST", "envs/%s/step" % env, {"action": "more"})
    assert st == 409, doc
    st, res = api(server, "GET", "episodes/%s?wait=60" % env)
    assert st == 200 and res["status"] == "completed", res
    assert json.dumps(res["messages"]) == json.dumps(ref["messages"])


def test_step_reward_branch_delete(server):
    task = {"image": IMAGE, "prompt": "Write 42.",
            "reward": {"scorer": "builtin:match", "ground_truth": "42"}}
    e = envs(server, task)
    (env,) = e["env_ids"]
    st, doc = api(server, "POST", "envs/%s/reward" % env)
    assert st == 200 and doc["reward"] == 0.0, doc
    # malformed actions: one line each, and the env still waits
    for bad in ({"action": 5}, {"action": {"tool_calls": "x"}}, {"action": {"role": "user"}},
                {"action": {"tool_calls": [1]}}, {"action": "x", "more": 1}, {}):
        st, doc = api(server, "POST", "envs/%s/step" % env, bad)
        assert st == 400 and "\n" not in doc["message"], (bad, doc)
    st, doc = api(server, "POST", "envs/%s/branch" % env, {"n": 0})
    assert st == 422, doc
    r = step(server, env, action(bash("echo 42 > /testbed/answer.txt"), 0))
    assert r["done"] is False, r
    st, doc = api(server, "POST", "envs/%s/reward" % env)
    assert st == 200 and doc["reward"] == 1.0 and doc["reward_info"]["scorer"] == "builtin:match"
    # raw text with a hermes tool call, parsed as lis run parses it
    r = step(server, env, '<tool_call>\n{"name": "execute_bash", "arguments": '
                          '{"command": "echo 7 > /testbed/seven"}}\n</tool_call>')
    assert r["done"] is False and r["info"]["step"] == 1, r
    # two new envs from its files and its history
    st, b = api(server, "POST", "envs/%s/branch" % env, {"n": 2})
    assert st == 202 and len(b["env_ids"]) == 2, b
    for child in b["env_ids"]:
        for _ in range(600):
            st, s = api(server, "GET", "envs/%s" % child)
            if s.get("waiting"):
                break
            time.sleep(0.1)
        assert s["waiting"] and s["steps"] == 2, s
        assert [m["role"] for m in s["observation"]].count("assistant") == 2, s
        r = step(server, child, action(bash("cat /testbed/answer.txt /testbed/seven"), 2))
        assert "42\\n7" in json.dumps(r["observations"]), r
        st, d = api(server, "DELETE", "envs/%s" % child)
        assert st == 200, d
    # DELETE ends the env: its result recorded as any episode's
    st, d = api(server, "DELETE", "envs/%s" % env)
    assert st == 200, d
    st, res = api(server, "GET", "episodes/%s?wait=60" % env)
    assert st == 200 and res["status"] == "cancelled", res
    assert len(res["turns"]) == 2
    st, doc = api(server, "POST", "envs/%s/step" % env, {"action": "x"})
    assert st == 409, doc


def test_idle_env_reclaimed(server):
    e = envs(server, {"image": IMAGE, "prompt": "Nobody answers."}, idle_timeout_s=2)
    (env,) = e["env_ids"]
    st, res = api(server, "GET", "episodes/%s?wait=120" % env)
    assert st == 200 and res["status"] == "cancelled", res
    assert res["error"] == "idle for 2 s", res
    st, doc = api(server, "GET", "envs/%s" % env)
    assert st == 200 and doc["done"] is True, doc


def test_dead_trainer_ends_nothing_it_did_not_ask_for(server):
    """A trainer killed (-9) after making two envs and stepping one: its envs stay as
    they were, usable by another client, until their idle timeout reclaims them; the
    server keeps nothing past its caps and leaves no sandbox behind."""
    import os
    import signal
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    code = (
        "import json, sys, time\n"
        "sys.path.insert(0, %r)\n"
        "from test_rl_e2e import api\n"
        "class S: sock = %r\n"
        "st, doc = api(S, 'POST', 'envs?wait=120', {'task': {'image': %r, 'prompt': 'p'},"
        " 'n': 2, 'idle_timeout_s': 8})\n"
        "e = doc['env_ids']\n"
        "api(S, 'POST', 'envs/%%s/step' %% e[0], {'action': {'role': 'assistant',"
        " 'content': None, 'tool_calls': [{'id': 'c0', 'type': 'function', 'function':"
        " {'name': 'execute_bash', 'arguments': '{\"command\": \"echo kept > /tmp/k\"}'}}]}})\n"
        "print(json.dumps(e), flush=True)\n"
        "time.sleep(600)\n") % (here, server.sock, IMAGE)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    env_ids = json.loads(p.stdout.readline())
    p.send_signal(signal.SIGKILL)
    p.wait()
    # both still there, waiting for an action; the stepped one kept its turn
    for e in env_ids:
        st, doc = api(server, "GET", "envs/%s" % e)
        assert st == 200 and doc["done"] is False, doc
    # another client goes on with the first: the file its dead trainer wrote is there
    d = step(server, env_ids[0], action(bash("cat /tmp/k"), 1))
    assert "kept" in json.dumps(d["observations"]), d
    # no one touches them any more: reclaimed by their idle timeout, nothing left
    for e in env_ids:
        st, res = api(server, "GET", "episodes/%s?wait=120" % e)
        assert st == 200 and res["status"] == "cancelled", res
        assert res["error"] == "idle for 8 s", res
    deadline = time.monotonic() + 60
    while api(server, "GET", "rl/status")[1]["sandboxes"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert api(server, "GET", "rl/status")[1]["sandboxes"] == 0
