"""What the client makes of answers a real server gives rarely or only under
failure (a fork element that failed, a dropped connection, a 409 to a retry),
against a small scripted HTTP server on a unix socket. Needs no lis."""
import json
import threading
from http.server import BaseHTTPRequestHandler

import pytest

import lis
from conftest import UnixHTTPServer, json_reply

SB = {"id": "a" * 64, "name": "lis_aaaa", "image": "x", "state": "running"}


class Fake:
    """Answers each request with the next scripted step for its path: a
    (status, body) pair, "drop" to close the connection unanswered, or "hang"
    to answer nothing."""

    def __init__(self, script):
        self.script = {k: list(v) for k, v in script.items()}
        self.seen = []
        self.release = threading.Event()
        fake = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                fake.seen.append((self.command, self.path, dict(self.headers),
                                  json.loads(body) if body else None))
                steps = fake.script.get("%s %s" % (self.command, self.path))
                if not steps:
                    step = (404, {"message": "page not found"})
                else:
                    step = steps.pop(0) if len(steps) > 1 else steps[0]
                if step == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if step == "hang":  # a stuck server: no answer until closed
                    fake.release.wait(30)
                    return
                json_reply(self, *step)

            do_GET = do_POST = do_DELETE = do_PUT = _any

        self.http = UnixHTTPServer(H, "lis-fake-")
        self.path = self.http.path

    def close(self):
        self.release.set()
        self.http.close()


@pytest.fixture
def fake():
    made = []

    def make(script):
        f = Fake(script)
        made.append(f)
        return f
    yield make
    for f in made:
        f.close()


def keys(f, method_path):
    return [h.get("Idempotency-Key") for m, p, h, _ in f.seen if "%s %s" % (m, p) == method_path]


def test_fork_elements_that_failed_are_exceptions_with_the_servers_message(fake):
    snap = {"id": "sha256:" + "b" * 64, "tag": None, "parent": "sha256:" + "c" * 64,
            "depth": 2, "files": 3, "bytes": 10, "paused_ms": 1.5, "existed": False}
    sb2 = dict(SB, id="d" * 64)
    f = fake({"GET /lis/v1/sandboxes/x": [(200, SB)],
              "POST /lis/v1/sandboxes/%s/fork" % SB["id"]: [
                  (201, {"snapshot": snap, "sandboxes": [
                      sb2, {"error": "fork 2 of 3: out of disk"},
                      {"id": "f" * 64, "error": "deleted since", "status": 404}]})]})
    sb = lis.Sandbox.connect("x", socket=f.path)
    res = sb.fork(3, tag="t", memory="1g", net="none", envs={"K": "v"})
    assert len(res) == 3
    assert isinstance(res[0], lis.Sandbox) and res[0].sandbox_id == "d" * 64
    assert type(res[1]) is lis.SandboxException and res[1].message == "fork 2 of 3: out of disk"
    assert isinstance(res[2], lis.NotFoundException) and str(res[2]) == "deleted since"
    assert res[1].sandbox_id is None and res[2].sandbox_id == "f" * 64
    assert res.snapshot.id == snap["id"] and res.snapshot.depth == 2
    assert res.snapshot.paused_ms == 1.5 and res.snapshot.existed is False
    _, _, hdrs, body = f.seen[-1]
    assert body == {"count": 3, "tag": "t", "memory": "1g", "net": "none", "env": {"K": "v"}}
    assert len(hdrs["Idempotency-Key"]) == 36  # a uuid4, made by the client


def test_a_dropped_connection_is_retried_with_the_same_key(fake):
    f = fake({"POST /lis/v1/sandboxes": ["drop", "drop", (201, SB)]})
    sb = lis.Sandbox.create(image="x", socket=f.path)
    assert sb.sandbox_id == SB["id"]
    ks = keys(f, "POST /lis/v1/sandboxes")
    assert len(ks) == 3 and ks[0] and len(set(ks)) == 1
    # the next create has a key of its own
    lis.Sandbox.create(image="x", socket=f.path)
    assert keys(f, "POST /lis/v1/sandboxes")[3] != ks[0]


def test_a_409_to_a_retry_waits_for_the_first_attempt(fake):
    f = fake({"POST /lis/v1/sandboxes": [
        "drop", (409, {"message": "a create with this Idempotency-Key is in progress"}),
        (200, SB)]})
    assert lis.Sandbox.create(image="x", idempotency_key="mine", socket=f.path).sandbox_id == SB["id"]
    assert keys(f, "POST /lis/v1/sandboxes") == ["mine"] * 3


def test_a_409_to_a_first_attempt_is_an_error(fake):
    f = fake({"POST /lis/v1/sandboxes": [(409, {"message": "name in use"})]})
    with pytest.raises(lis.ConflictException, match="name in use"):
        lis.Sandbox.create(image="x", name="n", socket=f.path)
    assert len(f.seen) == 1


def test_a_request_without_a_key_is_not_sent_twice(fake):
    f = fake({"GET /lis/v1/sandboxes/x": [(200, SB)],
              "POST /lis/v1/sandboxes/%s/snapshot" % SB["id"]: ["drop"]})
    sb = lis.Sandbox.connect("x", socket=f.path)
    with pytest.raises(lis.SandboxException, match="talking to lis serve"):
        sb.snapshot("t")
    assert len([s for s in f.seen if s[0] == "POST"]) == 1


def test_retries_end(fake, monkeypatch):
    import lis._http
    monkeypatch.setattr(lis._http, "RETRY_DELAYS", (0.01, 0.01))
    f = fake({"POST /lis/v1/sandboxes": ["drop"]})
    with pytest.raises(lis.SandboxException, match="talking to lis serve"):
        lis.Sandbox.create(image="x", socket=f.path)
    assert len(f.seen) == 3


def test_snapshot_list_and_metrics_shapes(fake):
    f = fake({"GET /lis/v1/sandboxes/x": [(200, SB)],
              "GET /lis/v1/snapshots": [(200, [{"id": "sha256:" + "e" * 64,
                                                "tags": ["t1:latest", "t2:v1"], "depth": 2,
                                                "size": 77, "files": 4, "source": "sandbox x"}])],
              "GET /lis/v1/sandboxes/%s/stats" % SB["id"]: [
                  (200, {"state": "running", "cpu_seconds": 1.25, "memory_bytes": 4096,
                         "memory_peak_bytes": 8192, "memory_limit_bytes": None, "pids": 3,
                         "disk_bytes": 512, "disk_limit_bytes": 1 << 30})]})
    snaps = lis.Sandbox.list_snapshots(socket=f.path)
    assert [(s.id[:8], s.tag, s.tags, s.depth, s.bytes, s.files, s.source) for s in snaps] == [
        ("sha256:e", "t1:latest", ["t1:latest", "t2:v1"], 2, 77, 4, "sandbox x")]
    m = lis.Sandbox.connect("x", socket=f.path).get_metrics()
    assert (m.state, m.cpu_seconds, m.mem_used, m.mem_total, m.pids, m.disk_used,
            m.disk_total) == ("running", 1.25, 4096, None, 3, 512, 1 << 30)
    assert m["memory_peak_bytes"] == 8192


def test_a_server_that_does_not_answer_is_a_timeout_not_a_hang(fake):
    import lis._http
    f = fake({"GET /lis/v1/sandboxes/x": ["hang"], "POST /lis/v1/sandboxes": ["hang"]})
    c = lis._http.Client(f.path, start=False, timeout=0.5)
    with pytest.raises(lis.TimeoutException) as ei:
        c.call("GET", "sandboxes/x", retry=True)
    assert "did not answer within" in ei.value.message
    with pytest.raises(lis.TimeoutException):
        c.call("POST", "sandboxes", {"image": "x"}, {"Idempotency-Key": "k"}, retry=True)
    # not sent again: a stuck server is not asked twice
    assert [p for _, p, _, _ in f.seen] == ["/lis/v1/sandboxes/x", "/lis/v1/sandboxes"], f.seen
    assert lis._http.Client(f.path, start=False).timeout == lis._http.REQUEST_TIMEOUT
