"""The client's basic features against a real lis serve: commands, files,
errors, kill, a sandbox's timeout, idempotent create (also across a dropped
connection)."""
import io
import os
import socket
import tarfile
import tempfile
import threading

import pytest

import lis
from conftest import IMAGE, wait_until


def test_commands_run_streams_and_returns_the_result(server):
    with lis.Sandbox.create(image=IMAGE, memory="256m", net="none", envs={"WHO": "lis"}) as sb:
        seen_out, seen_err = [], []
        r = sb.commands.run("echo hello $WHO; echo oops >&2; exit 4", timeout=30,
                            on_stdout=seen_out.append, on_stderr=seen_err.append)
        assert isinstance(r, lis.CommandResult)
        assert (r.exit_code, r.stdout, r.stderr) == (4, "hello lis\n", "oops\n")
        assert "".join(seen_out) == "hello lis\n" and "".join(seen_err) == "oops\n"
        r = sb.commands.run(["python3", "-c", "import os; print(os.getcwd(), os.environ['X'])"],
                            cwd="/tmp", envs={"X": "y"})
        assert (r.exit_code, r.stdout) == (0, "/tmp y\n")
        with pytest.raises(lis.TimeoutException):
            sb.commands.run("sleep 30", timeout=1)
        assert sb.is_running() and not sb.is_paused()
        info = sb.get_info()
        assert info["memory"] == 256 << 20 and info["net"] == "none"


def test_a_utf8_character_split_across_chunks_arrives_whole(sb):
    # the two bytes of "é" leave in two writes, so in two events
    r = sb.commands.run(r"printf '\303'; sleep 0.3; printf '\251\n'; printf '\342\202' >&2;"
                        r" sleep 0.3; printf '\254' >&2")
    assert (r.stdout, r.stderr) == ("é\n", "€")


def test_files(sb):
    info = sb.files.write("/data/a/notes.txt", "line 1\n")
    assert (info.name, info.type, info.size) == ("notes.txt", "file", 7)
    sb.files.write("/data/a/raw.bin", b"\x00\x01\xfe")
    assert sb.files.read("/data/a/notes.txt") == "line 1\n"
    assert sb.files.read("/data/a/raw.bin", format="bytes") == b"\x00\x01\xfe"
    assert sorted((e.name, e.type) for e in sb.files.list("/data/a")) == [
        ("notes.txt", "file"), ("raw.bin", "file")]
    assert sb.files.exists("/data/a") and not sb.files.exists("/data/nope")
    with pytest.raises(lis.NotFoundException) as ei:
        sb.files.read("/data/nope")
    assert "/data/nope" in str(ei.value)
    assert sb.commands.run("cat /data/a/notes.txt").stdout == "line 1\n"
    big = os.urandom(2 << 20)  # whole, both ways
    assert sb.files.write("/data/big.bin", big).size == len(big)
    assert sb.files.read("/data/big.bin", format="bytes") == big


def test_archives_keep_modes_and_links(sb):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"#!/bin/sh\necho run\n"
        ti = tarfile.TarInfo("bin/tool.sh")
        ti.size, ti.mode = len(data), 0o755
        tar.addfile(ti, io.BytesIO(data))
        ln = tarfile.TarInfo("tool")
        ln.type, ln.linkname = tarfile.SYMTYPE, "bin/tool.sh"
        tar.addfile(ln)
    sb.commands.run("mkdir -p /opt/x")
    sb.files.put_archive("/opt/x", buf.getvalue())
    assert sb.commands.run("/opt/x/tool").stdout == "run\n"
    with tarfile.open(fileobj=io.BytesIO(sb.files.get_archive("/opt/x")), mode="r") as tar:
        got = {m.name: m for m in tar.getmembers()}
    assert got["x/bin/tool.sh"].mode & 0o777 == 0o755
    assert got["x/tool"].issym() and got["x/tool"].linkname == "bin/tool.sh"


def test_errors_carry_the_servers_message_and_kill(server):
    with pytest.raises(lis.NotFoundException) as ei:
        lis.Sandbox.create(image="no-such-image:v0")
    assert "No such image" in ei.value.message and ei.value.status == 404
    with pytest.raises(lis.InvalidArgumentException):
        lis.Sandbox.create(image=IMAGE, net="everywhere")
    sb = lis.Sandbox.create(image=IMAGE)
    assert lis.Sandbox.connect(sb.sandbox_id).sandbox_id == sb.sandbox_id
    assert sb.kill() is True
    assert sb.kill() is False
    assert not sb.is_running()
    with pytest.raises(lis.NotFoundException):
        sb.commands.run("true")
    with pytest.raises(lis.NotFoundException):
        lis.Sandbox.connect(sb.sandbox_id)


def test_timeout_ends_a_sandbox_nobody_deletes(server):
    # the default is no limit
    with lis.Sandbox.create(image=IMAGE) as sb:
        assert sb.get_info()["end_at"] is None
    for bad in (-1, "soon", 31 * 86400):
        with pytest.raises(lis.InvalidArgumentException) as ei:
            lis.Sandbox.create(image=IMAGE, timeout=bad)
        assert "timeout" in ei.value.message
    sb = lis.Sandbox.create(image=IMAGE, timeout=600)
    end = sb.get_info()["end_at"]
    assert end and end.startswith("20")
    sb.set_timeout(0)  # no limit any more
    assert sb.get_info()["end_at"] is None
    with pytest.raises(lis.InvalidArgumentException):
        sb.set_timeout(-5)
    forks = sb.fork(2, timeout=1)
    assert all(isinstance(f, lis.Sandbox) for f in forks), forks
    assert forks[0].get_info()["end_at"]
    sb.set_timeout(1)  # as a client that died would leave it: the server ends it
    def gone(s):
        try:
            s.get_info()  # "removing" for a moment, then 404
            return False
        except lis.NotFoundException:
            return True
    assert wait_until(lambda: gone(sb) and all(gone(f) for f in forks), 30), \
        "a sandbox outlived its timeout"
    with pytest.raises(lis.NotFoundException):
        sb.commands.run("true")


def test_idempotency_key(server):
    a = lis.Sandbox.create(image=IMAGE, idempotency_key="idem-pytest-1")
    try:
        b = lis.Sandbox.create(image=IMAGE, idempotency_key="idem-pytest-1")
        assert a.sandbox_id == b.sandbox_id
        assert [s.sandbox_id for s in lis.Sandbox.list()].count(a.sandbox_id) == 1
        # without a key of the caller's, every create gets its own (uuid4): two sandboxes
        c = lis.Sandbox.create(image=IMAGE)
        d = lis.Sandbox.create(image=IMAGE)
        assert len({a.sandbox_id, c.sandbox_id, d.sandbox_id}) == 3
        c.kill()
        d.kill()
    finally:
        a.kill()


RELAY_TIMEOUT = 120  # seconds; a create under ASan on a loaded machine takes a few


class DroppingProxy:
    """A unix-socket proxy to lis serve that passes the first request on whole and
    closes the client's connection before the answer reaches it (as a network drop
    after the server acted would); later connections are relayed both ways."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.dir = tempfile.mkdtemp(prefix="lis-px-")
        self.path = os.path.join(self.dir, "px.sock")
        self.requests = []  # the head of each request seen
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _read_request(c):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":", 1)[1])
        # http.client sends the head and the body apart: the body may come later
        while len(body) < n:
            chunk = c.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        # a relay that stalls fails the test in minutes, not at the client's timeout (600 s)
        c.settimeout(RELAY_TIMEOUT)
        with c:
            req = self._read_request(c)
            if not req:
                return  # the client's liveness probe
            self.requests.append(req.split(b"\r\n\r\n")[0].decode())
            # one request per upstream connection, so its end marks the answer's
            line, _, rest = req.partition(b"\r\n")
            req = line + b"\r\nConnection: close\r\n" + rest
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            up.settimeout(RELAY_TIMEOUT)
            up.connect(self.upstream)
            with up:
                up.sendall(req)
                answer = b""
                while True:
                    chunk = up.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
            if len(self.requests) > 1:
                c.sendall(answer)
            # else: the server made the sandbox; the client never hears of it

    def close(self):
        self.srv.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def _key_of(head):
    for line in head.split("\r\n"):
        if line.lower().startswith("idempotency-key:"):
            return line.split(":", 1)[1].strip()
    return None


def test_a_create_retried_after_a_dropped_connection_makes_one_sandbox(server):
    before = {s.sandbox_id for s in lis.Sandbox.list()}
    px = DroppingProxy(server.sock)
    try:
        sb = lis.Sandbox.create(image=IMAGE, socket=px.path)
    except BaseException:
        px.close()
        raise
    try:
        posts = [h for h in px.requests if h.startswith("POST /lis/v1/sandboxes ")]
        assert len(posts) == 2, px.requests
        k1, k2 = _key_of(posts[0]), _key_of(posts[1])
        assert k1 and k1 == k2  # a uuid4 made by the client, sent again
        made = {s.sandbox_id for s in lis.Sandbox.list()} - before
        assert made == {sb.sandbox_id}
        assert lis.Sandbox.connect(sb.sandbox_id).commands.run("echo ok").stdout == "ok\n"
    finally:
        sb.kill()  # through the proxy, which relays what follows the first request
        px.close()
