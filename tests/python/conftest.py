"""Fixtures of the Python client's tests: a real `lis serve` (LIS_BIN), started
for the session as the user running pytest (the unprivileged test user under
`make test`), with the Debian fixture (LIS_TEST_DEBIAN) imported as an image
into a private rootfs store; the client is imported from the checkout."""
import json
import os
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# the package from the checkout (python/lis), or beside this file where test.sh
# puts it (src-tests/python holds both)
for cand in (HERE, os.path.join(HERE, "..", "..", "python")):
    if os.path.isdir(os.path.join(cand, "lis")):
        sys.path.insert(0, os.path.abspath(cand))
        break

IMAGE = "lis-test:v1"


class Server:
    def __init__(self, tmp):
        self.tmp = tmp
        self.sock = os.path.join(tmp, "run", "docker.sock")
        self.env = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(tmp, "run"),
                        XDG_DATA_HOME=os.path.join(tmp, "data"), LIS_SOCKET=self.sock)
        self.proc = None
        self.extra = []  # more flags of lis serve

    def lis(self, *args, check=True):
        r = subprocess.run([os.environ["LIS_BIN"], *args], env=self.env, capture_output=True,
                           text=True, timeout=600)
        if check and r.returncode != 0:
            raise AssertionError("lis %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
        return r

    def start(self):
        os.makedirs(os.path.join(self.tmp, "run"), mode=0o700, exist_ok=True)
        log = open(os.path.join(self.tmp, "serve.log"), "wb")
        self.proc = subprocess.Popen([os.environ["LIS_BIN"], "serve", "--socket", self.sock,
                                      "--memory", "512m", *self.extra], env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=log)
        log.close()
        for _ in range(400):
            if os.path.exists(self.sock):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.025)
        raise AssertionError("lis serve did not come up: %s" % self.log())

    def log(self):
        with open(os.path.join(self.tmp, "serve.log"), errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)

    def remove_store(self):
        """Deletes the private store with lis (its files may belong to the user's
        subordinate ids, which only lis's own removal reaches), then the rest."""
        for _ in range(5):
            r = self.lis("rootfs", "ls", "--json", check=False)
            try:
                images = json.loads(r.stdout or "[]")
            except ValueError:
                break
            if not images:
                break
            for im in images:
                self.lis("rootfs", "rm", im.get("ref") or im["digest"], "--force", check=False)
            self.lis("rootfs", "gc", check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)


def new_server(prefix, extra=()):
    """A lis serve of its own (its store with the Debian fixture as IMAGE), started with
    the flags in extra; nothing left when it cannot start."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    os.chmod(tmp, 0o700)
    s = Server(tmp)
    s.extra = list(extra)
    tar = os.path.join(tmp, "img.tar")
    try:
        subprocess.run(["tar", "-C", os.environ["LIS_TEST_DEBIAN"], "-cf", tar, "."], check=True)
        s.lis("rootfs", "import", tar, "--name", IMAGE, "-q")
        os.unlink(tar)
        s.start()
    except BaseException:
        if s.proc:
            s.stop()
        s.remove_store()
        raise
    return s


def need_servers():
    """Skips the test unless a real lis serve can run: LIS_BIN, the Debian
    fixture, an unprivileged user."""
    if not os.environ.get("LIS_BIN") or not os.access(os.environ["LIS_BIN"], os.X_OK):
        pytest.skip("LIS_BIN not set (run through `make test`)")
    deb = os.environ.get("LIS_TEST_DEBIAN")
    if not deb or not os.path.isdir(deb):
        pytest.skip("LIS_TEST_DEBIAN not set (the Debian minbase fixture)")
    if os.getuid() == 0:
        pytest.skip("run as an unprivileged user (make test runs these as LIS_TEST_USER)")


@pytest.fixture(scope="session")
def server():
    need_servers()
    s = new_server("lis-py-")
    saved = {k: os.environ.get(k) for k in ("LIS_SOCKET", "XDG_RUNTIME_DIR", "XDG_DATA_HOME")}
    os.environ.update(LIS_SOCKET=s.sock, XDG_RUNTIME_DIR=s.env["XDG_RUNTIME_DIR"],
                      XDG_DATA_HOME=s.env["XDG_DATA_HOME"])
    yield s
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    rc = s.stop()
    s.remove_store()
    assert rc == 0, "lis serve exited with %s" % rc


@pytest.fixture
def sb(server):
    import lis
    box = lis.Sandbox.create(image=IMAGE)
    yield box
    box.kill()


def wait_until(pred, seconds=20.0, step=0.1):
    """Polls pred until it is true (never asserts a duration: the machine is shared)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


class UnixHTTPServer:
    """The fake servers' transport: a threading HTTP server with handler (a
    BaseHTTPRequestHandler class) on a unix socket in a private directory."""

    def __init__(self, handler, prefix):
        class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.path = os.path.join(self.dir, "fake.sock")
        self.srv = S(self.path, handler)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def json_reply(handler, status, doc):
    """Answers handler's request with doc as JSON."""
    data = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
