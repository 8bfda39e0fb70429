"""lis.Cluster (docs/rl.md, "Many services: lis.Cluster", issue 31 item 3): one
trainer, many `lis serve`. Two real servers as the unprivileged test user, each
with its own runtime and data directories (nothing shared), one of them also on
tcp:// with mutual TLS as on another node, the Debian fixture and
tests/fake_llm.py with a latency, so that groups are in flight; one of them
killed (-9), then stopped, under its groups."""
import json
import os
import signal
import socket
import threading

import pytest

from conftest import new_server, need_servers, wait_until
from test_rl_e2e import SUBMIT, api, bash, descendants, fake_factory, group  # noqa: F401

import lis


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pair():
    """Two services: a with room for 2 sandboxes, b for 6; b also on
    b.tcp (tcp://127.0.0.1:PORT, mutual TLS with the client's files in
    b.tls), as on another node."""
    need_servers()
    a = new_server("lis-cl-a-", ["--rl-max-live", "2"])
    try:
        tls = os.path.join(a.tmp, "tls")
        a.lis("serve", "--tls-init", tls)
        port = free_port()
        b = new_server("lis-cl-b-", ["--rl-max-live", "6", "--tcp", "127.0.0.1:%d" % port,
                                     "--tls-dir", tls])
        b.tcp, b.tls = "tcp://127.0.0.1:%d" % port, tls
    except BaseException:
        a.stop()
        a.remove_store()
        raise
    yield a, b
    for s in (a, b):
        if s.proc.poll() is None:
            assert s.stop() == 0, s.log()
        s.lis("sandbox", "gc", check=False)  # what a killed one left
        s.remove_store()


def groups(server):
    """The server's groups per phase (rl/status)."""
    st, doc = api(server, "GET", "rl/status")
    assert st == 200, doc
    return doc["groups"]


def one_line(text):
    return text and "\n" not in text


def test_cluster_refuses_a_bad_endpoints_file(tmp_path):
    cases = {"missing.json": None, "bad.json": "{not json", "empty.json": '{"endpoints": []}',
             "numbers.json": '{"endpoints": [1, 2]}', "list.json": '["tcp://h:1"]',
             "nokey.json": '{"cert_path": "/x"}'}
    for name, text in cases.items():
        path = str(tmp_path / name)
        if text is not None:
            with open(path, "w") as f:
                f.write(text)
        with pytest.raises(lis.SandboxException) as ei:
            lis.Cluster(endpoints_file=path)
        assert path in str(ei.value) and one_line(str(ei.value)), (name, str(ei.value))
    for kw in ({}, {"endpoints": ["/a.sock"], "endpoints_file": path},
               {"endpoints": []}, {"endpoints": "/a.sock"}, {"endpoints": ["/a", "/a"]},
               {"endpoints": ["tcp://no-port"]}):
        with pytest.raises(lis.SandboxException):
            lis.Cluster(**kw)


def test_cluster_with_every_service_dead_says_so_per_group(tmp_path):
    gone = str(tmp_path / "gone.sock")  # no file
    closed = str(tmp_path / "closed.sock")  # a socket nobody listens on
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(closed)
    s.close()
    t = socket.socket()  # bound, never listening: connections refused
    t.bind(("127.0.0.1", 0))
    http = "http://127.0.0.1:%d" % t.getsockname()[1]
    try:
        dead = [gone, closed, http]
        cl = lis.Cluster(dead)
        st = cl.status()
        assert [x["endpoint"] for x in st] == dead
        assert all(x["ok"] is False and one_line(x["error"]) for x in st), st
        body = {"task": {"image": "lis-test:v1", "prompt": "p"}, "n": 2,
                "inference": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}}
        step = cl.collect([body, dict(body, labels={"i": 1})])
        assert [g.index for g in step] == [0, 1] and step[1].labels == {"i": 1}
        assert not step.done and len(step.errors) == 2
        for g in step:
            assert isinstance(g.error, lis.SandboxException)
            assert all(d in g.error.message for d in dead), g.error.message
            assert one_line(g.error.message)
            assert g.group_id is None and g.endpoint is None and g.episodes == []
        with pytest.raises(lis.SandboxException) as ei:
            cl.submit(body)
        assert all(d in ei.value.message for d in dead), ei.value.message
    finally:
        t.close()


def test_cluster_takes_its_cert_path_from_the_argument_or_the_file(tmp_path, monkeypatch):
    """tcp:// reads its TLS files from cert_path (over the file's, relative to the
    file's directory), never from an environment the client changed."""
    monkeypatch.delenv("LIS_CERT_PATH", raising=False)
    monkeypatch.delenv("DOCKER_CERT_PATH", raising=False)
    path = str(tmp_path / "endpoints.json")
    with open(path, "w") as f:
        json.dump({"endpoints": ["tcp://127.0.0.1:1"], "cert_path": "tls"}, f)
    (err,) = [x["error"] for x in lis.Cluster(endpoints_file=path).status()]
    assert str(tmp_path / "tls") in err and "ca.pem" in err, err
    (err,) = [x["error"] for x in lis.Cluster(endpoints_file=path, cert_path="/no/such").status()]
    assert "/no/such" in err, err
    (err,) = [x["error"] for x in lis.Cluster(["tcp://127.0.0.1:1"]).status()]
    assert "LIS_CERT_PATH" in err, err
    assert "LIS_CERT_PATH" not in os.environ and "DOCKER_CERT_PATH" not in os.environ


def test_cluster_spreads_groups_by_free_capacity(pair, fake_factory, tmp_path):
    a, b = pair
    fake = fake_factory({"mode": "openai", "latency": 1.0,
                         "rows": {"default": [bash("true"), SUBMIT]}})
    path = str(tmp_path / "endpoints.json")
    with open(path, "w") as f:  # as scripts/slurm/lis-serve.sbatch writes it
        json.dump({"endpoints": [a.sock, b.tcp], "cert_path": b.tls, "job_id": "123",
                   "nodes": ["n1", "n2"]}, f)
    cl = lis.Cluster(endpoints_file=path)
    assert cl.endpoints == [a.sock, b.tcp]
    st = cl.status()
    assert [x["endpoint"] for x in st] == [a.sock, b.tcp] and all(x["ok"] for x in st), st
    assert [x["status"]["max_live"] for x in st] == [2, 6]
    step = cl.collect([group(fake, "spread %d" % i, labels={"i": i}) for i in range(8)])
    assert step.done and step.errors == [], step.errors
    assert [g.labels for g in step] == [{"i": i} for i in range(8)]
    on = [g.endpoint for g in step]
    assert on.count(b.tcp) > on.count(a.sock) > 0, on  # the roomier one got more
    by = {a.sock: a, b.tcp: b}
    for g in step:
        assert g.retries == [] and [e["status"] for e in g.episodes] == ["completed"], g
        st, doc = api(by[g.endpoint], "GET", "groups/" + g.group_id)  # where it says it ran
        assert st == 200 and doc["episode_ids"] == g.episode_ids, doc
    # submit(): the same placement, one group at a time, its endpoint said
    g = cl.submit(group(fake, "one"))
    assert g["endpoint"] in (a.sock, b.tcp) and len(g["episode_ids"]) == 1
    res = cl.episodes(g["endpoint"]).results(g["group_id"], wait=120)
    assert res["done"] is True


def test_cluster_refused_body_is_its_groups_error_not_retried(pair, fake_factory):
    a, b = pair
    fake = fake_factory({"mode": "openai", "rows": {"default": [SUBMIT]}})
    cl = lis.Cluster([a.sock, b.sock])
    before = [sum(groups(s).values()) for s in (a, b)]
    step = cl.collect([group(fake, "good"), dict(group(fake, "bad"), bogus=1)])
    good, bad = step
    assert good.done and good.error is None and good.retries == []
    assert isinstance(bad.error, lis.InvalidArgumentException) and bad.error.status == 400
    assert "bogus" in bad.error.message and one_line(bad.error.message)
    assert bad.retries == [] and bad.group_id is None and not bad.done  # not tried elsewhere
    assert step.errors == [(1, bad.error)]
    with pytest.raises(lis.InvalidArgumentException):
        cl.submit(group(fake, "bad"), n=100000)
    assert [sum(groups(s).values()) for s in (a, b)] == [before[0] + (good.endpoint == a.sock),
                                                       before[1] + (good.endpoint == b.sock)]


def pending(server):
    return sum(n for phase, n in groups(server).items() if phase != "done")


def test_cluster_moves_the_groups_of_a_service_that_hangs(pair, fake_factory):
    """A service that stops answering (SIGSTOP: a node partitioned, a process
    stuck) loses its groups once a long-poll is silent past its wait plus the
    Cluster's timeout; a status read of it times out too. Its groups go on
    there, untaken, once it runs again."""
    a, b = pair
    fake = fake_factory({"mode": "openai", "latency": 1.5,
                         "rows": {"default": [bash("true"), SUBMIT]}})
    cl = lis.Cluster([a.sock, b.sock], timeout=3)
    before = [sum(groups(s).values()) for s in (a, b)]
    box = {}
    t = threading.Thread(target=lambda: box.update(
        step=cl.collect([group(fake, "hung %d" % i) for i in range(8)], poll_s=2)))
    t.start()
    try:
        assert wait_until(lambda: sum(groups(a).values()) + sum(groups(b).values())
                          == sum(before) + 8, 60)
        assert wait_until(lambda: descendants(a.proc.pid), 60)  # running there
        os.kill(a.proc.pid, signal.SIGSTOP)
        try:
            t.join(600)
            st = cl.status()
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
    finally:
        t.join(600)
    step = box["step"]
    assert step.done and step.errors == [], step.errors
    moved = [g for g in step if g.retries]
    assert moved
    for g in moved:
        (r,) = g.retries
        assert r["endpoint"] == a.sock and g.endpoint == b.sock, g
        assert "did not answer within" in r["error"], r
    for g in step:
        assert [e["status"] for e in g.episodes] == ["completed"], g
    assert st[0]["ok"] is False and "did not answer" in st[0]["error"] and st[1]["ok"], st
    # a runs again: what it had ends there (it was never told), and is not taken
    assert wait_until(lambda: pending(a) == 0, 120)
    assert cl.status()[0]["ok"] is True


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_cluster_moves_the_groups_of_a_killed_service(pair, fake_factory):
    """It kills pair's a (started again by the next test)."""
    a, b = pair
    fake = fake_factory({"mode": "openai", "latency": 1.5,
                         "rows": {"default": [bash("true"), SUBMIT]}})
    cl = lis.Cluster([a.sock, b.sock])
    before = [sum(groups(s).values()) for s in (a, b)]
    bodies = [group(fake, "moved %d" % i, n=2, labels={"i": i}) for i in range(8)]
    box = {}
    t = threading.Thread(target=lambda: box.update(step=cl.collect(bodies)))
    t.start()
    try:
        # every group placed (a holds some: its 2 sandboxes run one, the others wait)
        assert wait_until(lambda: sum(groups(a).values()) + sum(groups(b).values())
                          == sum(before) + 8, 60)
        ga = groups(a)
        on_a = sum(ga.values()) - before[0]
        assert on_a > 0 and sum(groups(b).values()) > before[1]
        assert wait_until(lambda: descendants(a.proc.pid), 60)  # its sandboxes
        kids = descendants(a.proc.pid)
        a.proc.kill()
        a.proc.wait()
    finally:
        t.join(600)
    step = box["step"]
    assert [g.index for g in step] == list(range(8))
    assert [g.labels for g in step] == [{"i": i} for i in range(8)]
    assert step.done and step.errors == [], step.errors
    moved = [g for g in step if g.retries]
    assert moved  # a's groups were not done when it died
    for g in step:
        assert [e["status"] for e in g.episodes] == ["completed"] * 2, g
        assert len(g.episode_ids) == 2
    for g in moved:
        (r,) = g.retries
        assert r["endpoint"] == a.sock and g.endpoint == b.sock, g
        assert r["group_id"] and r["group_id"] != g.group_id and one_line(r["error"]), r
    # each group placed on a either finished there before it died or moved to b
    assert on_a == len(moved) + sum(g.endpoint == a.sock for g in step)
    for g in step:
        if g.endpoint == b.sock:
            st, doc = api(b, "GET", "groups/" + g.group_id)
            assert st == 200 and doc["episode_ids"] == g.episode_ids
    # nothing of the killed one is left: its sandboxes died with it
    assert wait_until(lambda: not any(alive(p) for p in kids), 60), \
        [p for p in kids if alive(p)]
    a.lis("sandbox", "gc")
    assert json.loads(a.lis("sandbox", "ls", "--json").stdout or "[]") == []
    assert cl.status()[0]["ok"] is False and cl.status()[1]["ok"] is True


def test_cluster_moves_the_groups_of_a_stopped_service(pair, fake_factory):
    """A service stopped (SIGTERM, a node leaving) ends its episodes cancelled,
    "server stopped": no rollout, so its groups run again on the other. After
    the kill above: a started again on its own store."""
    a, b = pair
    if os.path.exists(a.sock):
        os.unlink(a.sock)  # left by the kill
    a.start()
    fake = fake_factory({"mode": "openai", "latency": 1.5,
                         "rows": {"default": [bash("true"), SUBMIT]}})
    cl = lis.Cluster([a.sock, b.sock])
    before = [sum(groups(s).values()) for s in (a, b)]
    box = {}
    t = threading.Thread(target=lambda: box.update(
        step=cl.collect([group(fake, "stopped %d" % i) for i in range(8)])))
    t.start()
    try:
        assert wait_until(lambda: sum(groups(a).values()) + sum(groups(b).values())
                          == sum(before) + 8, 60)
        assert wait_until(lambda: descendants(a.proc.pid), 60)  # running there
        assert a.stop() == 0, a.log()
    finally:
        t.join(600)
    step = box["step"]
    assert step.done and step.errors == [], step.errors
    moved = [g for g in step if g.retries]
    assert moved
    for g in step:
        assert [e["status"] for e in g.episodes] == ["completed"], g
        assert g.endpoint == b.sock or not g.retries
    for g in moved:
        assert [r["endpoint"] for r in g.retries] == [a.sock], g.retries
