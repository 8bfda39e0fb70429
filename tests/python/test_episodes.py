"""lis.Episodes and lis.AsyncEpisodes (docs/rl.md) against a small episodes
server in this file (stdlib http.server on a unix socket) that records what the
client sends (bodies, ?wait=, Last-Event-ID) and answers in docs/rl.md's
shapes: groups submitted and long-polled, a GRPO step collected in input order
with its stragglers, events resumed after a dropped stream. Needs no lis."""
import asyncio
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

import pytest

import lis
from conftest import UnixHTTPServer, json_reply
from lis.episodes import BODY_KEYS


def result(eid, gid, index, reward=1.0, status="completed"):
    """A finished episode's result as docs/rl.md shows it (the fields the client reads)."""
    return {"episode_id": eid, "group_id": gid, "index": index, "task_id": "t",
            "status": status, "error_stage": None, "error": None, "filter": False,
            "reward": reward, "turns": [], "tokens": {}, "labels": None}


class EpisodesServer:
    """Groups of n episodes that finish when the test says so (finish()); a
    long-poll waits until then or ?wait= has passed, as the server must.
    Events are scripted per episode: a list of connections, each a list of
    (id, event, data) sent before the stream is closed."""

    def __init__(self):
        self.seen = []  # (method, path, query dict, headers dict, body)
        self.groups = {}  # gid -> {"body", "ids", "done": set of finished indices}
        self.refuse = {}  # a task id -> (status, message) answered to its submit
        self.lose = set()  # group ids made, then unknown to their results (a lost group)
        self.streams = {}  # eid -> [[(id, event, data)...] per connection]
        self.finished = set()  # eids with a stream whose GET says they are finished
        self.cond = threading.Condition()
        srv = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _any(self):
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                with srv.cond:
                    srv.seen.append((self.command, url.path, q, dict(self.headers), body))
                parts = url.path.split("/")[3:]  # after /lis/v1/
                if parts[0] == "episodes" and parts[-1] == "events":
                    return srv.sse(self, parts[1])
                json_reply(self, *srv.route(self.command, parts, q, body))

            do_GET = do_POST = do_DELETE = do_PUT = _any

        self.http = UnixHTTPServer(H, "lis-eps-")
        self.path = self.http.path

    def close(self):
        with self.cond:
            self.cond.notify_all()
        self.http.close()

    def finish(self, gid, *indices):
        with self.cond:
            self.groups[gid]["done"].update(indices)
            self.cond.notify_all()

    def _results(self, gid):
        g = self.groups[gid]
        eps = [result(e, gid, i, reward=float(i)) if i in g["done"]
               else {"episode_id": e, "status": "running"} for i, e in enumerate(g["ids"])]
        # the server's order is not the client's: results come last-first
        return {"group_id": gid, "done": len(g["done"]) == len(g["ids"]), "episodes": eps[::-1]}

    def route(self, method, parts, q, body):
        if method == "POST" and parts == ["groups"]:
            tid = body["task"]["id"]
            if tid in self.refuse:
                st, msg = self.refuse[tid]
                return st, {"message": msg}
            with self.cond:
                for gid, g in self.groups.items():  # idempotent by request_id
                    if g["body"]["request_id"] == body["request_id"]:
                        return 200, {"group_id": gid, "episode_ids": g["ids"]}
                gid = "g-%s" % tid
                ids = ["e-%s-%d" % (tid, i) for i in range(body["n"])]
                self.groups[gid] = {"body": body, "ids": ids, "done": set()}
            return 202, {"group_id": gid, "episode_ids": ids}
        if method == "GET" and parts[0] == "groups" and parts[-1] == "results":
            gid = parts[1]
            if gid not in self.groups or gid in self.lose:
                return 404, {"message": "no group %s" % gid}
            end = time.monotonic() + float(q.get("wait", 0))
            with self.cond:
                while not self._results(gid)["done"] and time.monotonic() < end:
                    self.cond.wait(max(0.0, end - time.monotonic()))
                return 200, self._results(gid)
        if method == "POST" and parts[0] == "groups" and parts[-1] == "cancel":
            with self.cond:
                g = self.groups[parts[1]]
                g["cancelled"] = set(range(len(g["ids"]))) - g["done"]
                g["done"].update(g["cancelled"])
                self.cond.notify_all()
            return 200, {"group_id": parts[1], "cancelled": len(g["cancelled"])}
        if method == "GET" and parts[0] == "episodes" and len(parts) == 2:
            if parts[1] in self.streams and parts[1] not in self.finished:
                return 200, {"episode_id": parts[1], "status": "running"}
            return 200, result(parts[1], "g", 0)
        if method == "POST" and parts[-1] == "branch":
            return 202, {"episode_ids": ["b-%d" % i for i in range(body["n"])]}
        if method == "POST" and parts[-1] == "cancel":
            return 200, {"episode_id": parts[1], "status": "cancelled"}
        if method == "DELETE" and parts[0] == "episodes":
            return (409, {"message": "episode %s is running" % parts[1]}) \
                if parts[1] == "busy" else (200, {})
        if parts == ["rl", "status"]:
            return 200, {"groups": {"queued": 1, "setup": 0, "running": 2, "scoring": 0},
                         "sandboxes": 16, "memory_bytes": 1 << 30, "max_live": 512}
        if method == "PUT" and parts == ["rl", "inference"]:
            return 200, {"endpoints": len(body["endpoints"]),
                         "weight_version": body.get("weight_version")}
        return 404, {"message": "page not found"}

    def sse(self, h, eid):
        with self.cond:
            conns = self.streams.get(eid) or [[]]
            events = conns.pop(0) if len(conns) > 1 else conns[0]
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        for i, name, data in events:
            h.wfile.write(b": a comment line\n")
            h.wfile.write(("id: %d\nevent: %s\ndata: %s\n\n" % (i, name, json.dumps(data)))
                          .encode())
            h.wfile.flush()
        h.close_connection = True  # the end of this connection's stream


@pytest.fixture
def eps_server():
    s = EpisodesServer()
    yield s
    s.close()


def body(tid, n=2, **kw):
    b = {"task": {"id": tid, "image": "debian:12", "prompt": "p", "files": {"a.txt": "x"},
                  "setup": ["true"], "reward": {"scorer": "builtin:match", "ground_truth": "1"}},
         "n": n, "inference": {"base_url": "http://127.0.0.1:9/v1", "model": "m",
                               "sampling": {"temperature": 1.0}, "seeds": list(range(n))}}
    b.update(kw)
    return b


def test_submit_takes_every_body_key_as_keywords_or_a_dict(eps_server):
    eps = lis.Episodes(socket=eps_server.path, start=False)
    kw = dict(body("t1"), max_steps=4, deadline_s=900, tool_timeout_s=120,
              keep_snapshots=[2], labels={"global_step": 12}, effects=False, request_id="r1")
    assert set(kw) == set(BODY_KEYS)
    g = eps.submit(**kw)
    assert g == {"group_id": "g-t1", "episode_ids": ["e-t1-0", "e-t1-1"]}
    assert eps_server.seen[-1][:2] == ("POST", "/lis/v1/groups")
    assert eps_server.seen[-1][4] == kw  # sent as given, nothing added or dropped
    # a dict, keywords over it; without a request_id the client makes one
    eps.submit(body("t2"), n=3)
    sent = eps_server.seen[-1][4]
    assert sent["n"] == 3 and sent["task"]["id"] == "t2" and len(sent["request_id"]) == 36
    # the same request_id again: the same group (the server's idempotency)
    assert eps.submit(body("t1"), request_id="r1")["group_id"] == "g-t1"
    with pytest.raises(TypeError, match="unknown group key deadline"):
        eps.submit(body("t3"), deadline=5)
    assert len(eps_server.seen) == 3  # the typo was not sent


def test_results_long_poll_sends_wait_and_returns_when_done(eps_server):
    eps = lis.Episodes(socket=eps_server.path, start=False)
    g = eps.submit(body("t1"))
    gid = g["group_id"]
    # not done: the poll returns at its wait with the stragglers listed as running
    r = eps.results(gid, wait=0.2)
    assert r["done"] is False and {e["status"] for e in r["episodes"]} == {"running"}
    assert eps_server.seen[-1][2] == {"wait": "0.2"}
    threading.Timer(0.3, eps_server.finish, (gid, 0, 1)).start()
    r = eps.results(gid, wait=30)  # answered when the group is done, not at 30 s
    assert r["done"] is True and sorted(e["reward"] for e in r["episodes"]) == [0.0, 1.0]
    assert eps_server.seen[-1][2] == {"wait": "30"}
    assert eps.results(gid)["done"] and eps_server.seen[-1][2] == {}  # no wait: none sent
    with pytest.raises(lis.NotFoundException, match="no group g-nope"):
        eps.results("g-nope", wait=1)
    with pytest.raises(ValueError):
        eps.results(gid, wait=-1)


def test_episode_cancel_branch_delete_status_inference(eps_server):
    eps = lis.Episodes(socket=eps_server.path, start=False)
    assert eps.episode("e1", wait=5)["status"] == "completed"
    assert eps_server.seen[-1][1:3] == ("/lis/v1/episodes/e1", {"wait": "5"})
    assert eps.cancel("e1")["status"] == "cancelled"
    assert eps_server.seen[-1][:2] == ("POST", "/lis/v1/episodes/e1/cancel")
    assert eps.branch("e1", at_step=2, n=3, sampling={"temperature": 0.7},
                      seeds=[7, 8, 9]) == {"episode_ids": ["b-0", "b-1", "b-2"]}
    assert eps_server.seen[-1][1] == "/lis/v1/episodes/e1/branch"
    assert eps_server.seen[-1][4] == {"at_step": 2, "n": 3, "sampling": {"temperature": 0.7},
                                      "seeds": [7, 8, 9]}
    eps.branch("e1", 1)
    assert eps_server.seen[-1][4] == {"at_step": 1, "n": 1}
    assert eps.delete("e1") is None
    assert eps_server.seen[-1][:2] == ("DELETE", "/lis/v1/episodes/e1")
    with pytest.raises(lis.ConflictException, match="busy is running"):
        eps.delete("busy")
    assert eps.status()["groups"]["running"] == 2
    ep = [{"base_url": "http://h:8000/v1", "model": "policy", "api_key": "k"}]
    assert eps.set_inference(ep, "v13") == {"endpoints": 1, "weight_version": "v13"}
    assert eps_server.seen[-1][:2] == ("PUT", "/lis/v1/rl/inference")
    assert eps_server.seen[-1][4] == {"endpoints": ep, "weight_version": "v13"}
    # ids are quoted into the path
    eps.episode("a/b")
    assert eps_server.seen[-1][1] == "/lis/v1/episodes/a%2Fb"


def test_collect_keeps_input_order_and_reports_stragglers(eps_server):
    eps = lis.Episodes(socket=eps_server.path, start=False)
    eps_server.refuse["bad"] = (422, "n is over the server's cap (512)")
    eps_server.lose.add("g-gone")
    bodies = [body("a", n=3, labels={"k": 0}), body("bad"), body("slow", n=2), body("b", n=1),
              body("gone")]
    # groups a and b finish while the step waits; slow keeps episode 1 running
    timers = [threading.Timer(0.2, eps_server.finish, ("g-b", 0)),
              threading.Timer(0.4, eps_server.finish, ("g-a", 0, 1, 2)),
              threading.Timer(0.4, eps_server.finish, ("g-slow", 0))]
    for t in timers:
        t.start()
    step = eps.collect(bodies, deadline_s=2.0, poll_s=0.5)
    assert [g.index for g in step] == [0, 1, 2, 3, 4]
    assert [g.group_id for g in step] == ["g-a", None, "g-slow", "g-b", "g-gone"]
    a, bad, slow, b, gone = step
    # each group's episodes in index order, whatever order the server sent them in
    assert [e["episode_id"] for e in a.episodes] == ["e-a-0", "e-a-1", "e-a-2"]
    assert a.rewards == [0.0, 1.0, 2.0] and a.done and a.labels == {"k": 0}
    assert isinstance(bad.error, lis.InvalidArgumentException) and bad.error.status == 422
    assert "cap" in bad.error.message and bad.episodes == []
    assert not slow.done and slow.stragglers == ["e-slow-1"]
    assert slow.episodes[0]["status"] == "completed" and b.done
    assert not step.done and step.stragglers == [(2, "e-slow-1")]
    # a group whose results cannot be had is that group's error; the others went on
    assert isinstance(gone.error, lis.NotFoundException) and not gone.done
    assert gone.episode_ids == ["e-gone-0", "e-gone-1"]
    assert step.errors == [(1, bad.error), (4, gone.error)]
    # the polls carried waits no longer than the step's deadline
    waits = [float(q["wait"]) for m, p, q, _, _ in eps_server.seen if p.endswith("/results")]
    assert waits and max(waits) <= 2.0 and all(w >= 0 for w in waits)


def test_collect_cancels_stragglers_when_asked(eps_server):
    eps = lis.Episodes(socket=eps_server.path, start=False)
    step = eps.collect([body("x", n=2), body("y", n=1)], deadline_s=0.3, poll_s=0.2,
                       cancel_stragglers=True)
    assert step.done and step.stragglers == []
    cancels = [p for m, p, _, _, _ in eps_server.seen if p.endswith("/cancel")]
    assert cancels == ["/lis/v1/groups/g-x/cancel", "/lis/v1/groups/g-y/cancel"]
    assert [len(g.episodes) for g in step] == [2, 1]


def test_events_resume_with_last_event_id_after_a_dropped_stream(eps_server):
    steps = [(1, "step", {"step": 0}), (2, "step", {"step": 1}), (3, "reward", {"reward": 1.0}),
             (4, "final", {"episode_id": "e1", "status": "completed"})]
    # the first connection ends after two events, the second resends event 2
    # (seen already: skipped), the third is never asked for
    eps_server.streams["e1"] = [steps[:2], steps[1:], [(9, "final", {})]]
    eps = lis.Episodes(socket=eps_server.path, start=False)
    got = list(eps.events("e1"))
    assert [(e.id, e.event) for e in got] == [(1, "step"), (2, "step"), (3, "reward"),
                                              (4, "final")]
    assert got[2].data == {"reward": 1.0} and got[3].data["status"] == "completed"
    hdrs = [h for m, p, _, h, _ in eps_server.seen if p.endswith("/events")]
    assert len(hdrs) == 2
    assert "Last-Event-ID" not in hdrs[0] and hdrs[1]["Last-Event-ID"] == "2"
    # a caller resuming from its own last id
    eps_server.streams["e2"] = [[steps[3]]]
    assert [e.id for e in eps.events("e2", last_event_id=3)] == [4]
    assert eps_server.seen[-1][3]["Last-Event-ID"] == "3"


def test_events_of_an_episode_finished_meanwhile_end_with_its_result(eps_server):
    """A restarted server keeps results, not events: a resume past what it has
    gets no event; the episode's result is the final event."""
    eps_server.streams["e4"] = [[]]
    eps_server.finished.add("e4")
    eps = lis.Episodes(socket=eps_server.path, start=False)
    got = list(eps.events("e4", last_event_id=7))
    assert [(e.id, e.event, e.data["status"]) for e in got] == [(None, "final", "completed")]
    assert [(m, p) for m, p, _, _, _ in eps_server.seen] == [
        ("GET", "/lis/v1/episodes/e4/events"), ("GET", "/lis/v1/episodes/e4")]
    assert eps_server.seen[0][3]["Last-Event-ID"] == "7"


def test_events_that_never_reach_final_end_with_an_error(eps_server, monkeypatch):
    import lis.episodes
    monkeypatch.setattr(lis.episodes, "RETRY_DELAYS", (0.01, 0.01))
    eps_server.streams["e3"] = [[(1, "step", {})], []]  # then empty streams forever
    eps = lis.Episodes(socket=eps_server.path, start=False)
    seen = []
    with pytest.raises(lis.SandboxException, match="ended before its final event"):
        for ev in eps.events("e3"):
            seen.append(ev.id)
    assert seen == [1]
    # one connection with the event, then the empty ones it gave up after
    assert len([p for _, p, _, _, _ in eps_server.seen if p.endswith("/events")]) == 4


def test_async_episodes(eps_server):
    eps_server.streams["e-a-0"] = [[(1, "step", {}), (2, "final", {"status": "completed"})]]

    async def main():
        eps = lis.AsyncEpisodes(socket=eps_server.path, start=False)
        gs = await asyncio.gather(*(eps.submit(body(t)) for t in ("a", "b")))
        for g in gs:
            threading.Timer(0.2, eps_server.finish, (g["group_id"], 0, 1)).start()
        rs = await asyncio.gather(*(eps.results(g["group_id"], wait=30) for g in gs))
        evs = [(e.id, e.event) async for e in eps.events("e-a-0")]
        step = await eps.collect([body("c", n=1)], deadline_s=0.2, poll_s=0.1)
        return gs, rs, evs, step, await eps.status()
    gs, rs, evs, step, status = asyncio.run(main())
    assert [g["group_id"] for g in gs] == ["g-a", "g-b"]
    assert all(r["done"] for r in rs)
    assert evs == [(1, "step"), (2, "final")]
    assert step.stragglers == [(0, "e-c-0")] and status["sandboxes"] == 16
