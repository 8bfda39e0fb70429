"""HTTP/1.1 to lis serve (stdlib only): over its unix socket, starting one on demand
that exits when idle, or over TCP with mutual TLS to a server on another node."""
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import time

from .errors import SandboxException, TimeoutException, from_status


# Seconds an auto-started `lis serve` stays with no sandbox and no connection
# before it exits (its --idle-timeout, as podman's `system service --time`).
# LIS_IDLE_TIMEOUT overrides it. A server started by hand keeps running.
AUTO_IDLE_TIMEOUT = 60


def default_socket():
    """LIS_SOCKET (a path, or unix://PATH, tcp://HOST:PORT, http://HOST:PORT),
    else where `lis serve` puts its socket by default."""
    if os.environ.get("LIS_SOCKET"):
        return os.environ["LIS_SOCKET"]
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run:
        return os.path.join(run, "lis", "docker.sock")
    return "/tmp/lis-%d/docker.sock" % os.getuid()


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=None):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def cert_path():
    """Where the client's TLS files are: LIS_CERT_PATH, else DOCKER_CERT_PATH."""
    d = os.environ.get("LIS_CERT_PATH") or os.environ.get("DOCKER_CERT_PATH")
    if not d:
        raise SandboxException("tcp:// needs the client's certificate: set LIS_CERT_PATH (or "
                               "DOCKER_CERT_PATH) to a directory holding ca.pem, cert.pem and "
                               "key.pem (lis serve --tls-init DIR makes them)")
    return d


def _tls_context(cert_dir):
    """Mutual TLS as the docker CLI does it with DOCKER_CERT_PATH: the server's
    certificate checked against DIR/ca.pem (and its name), ours from cert.pem and
    key.pem."""
    try:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH,
                                         cafile=os.path.join(cert_dir, "ca.pem"))
        ctx.load_cert_chain(os.path.join(cert_dir, "cert.pem"),
                            os.path.join(cert_dir, "key.pem"))
    except (OSError, ssl.SSLError) as e:
        raise SandboxException("the client's TLS files in %s (ca.pem, cert.pem, key.pem): %s"
                               % (cert_dir, e)) from None
    return ctx


def _address(where):
    """("unix", path) or ("tcp" | "http", host, port) of a LIS_SOCKET value."""
    if where.startswith("unix://"):
        return ("unix", where[7:])
    for scheme in ("tcp", "http"):
        if where.startswith(scheme + "://"):
            host, _, port = where[len(scheme) + 3:].rstrip("/").rpartition(":")
            if not host or not port.isdigit():
                raise SandboxException("%s: want %s://HOST:PORT" % (where, scheme))
            return (scheme, host.strip("[]"), int(port))
    return ("unix", where)


def _alive(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def ensure_server(path, start=True, wait=15.0):
    """Returns None once a server answers on path; starts `lis serve --socket path
    --idle-timeout AUTO_IDLE_TIMEOUT` (LIS_BIN or lis on PATH) when none does and
    start is true, and returns its Popen. It outlives this process (one server
    for the user, shared by its scripts) and exits once it has had no sandbox and
    no connection for its idle time."""
    if _alive(path):
        return None
    if not start:
        raise SandboxException("no lis serve answers on %s" % path)
    lis = os.environ.get("LIS_BIN") or shutil.which("lis")
    if not lis:
        raise SandboxException("no lis serve answers on %s and no lis binary to start one "
                               "(put lis on PATH or set LIS_BIN)" % path)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    idle = os.environ.get("LIS_IDLE_TIMEOUT") or str(AUTO_IDLE_TIMEOUT)
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen([lis, "serve", "--socket", path, "--idle-timeout", idle],
                                stdin=subprocess.DEVNULL, stdout=null, stderr=null,
                                start_new_session=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if _alive(path):
            return proc
        if proc.poll() is not None:
            raise SandboxException("lis serve exited with %s before answering on %s"
                                   % (proc.returncode, path))
        time.sleep(0.05)
    raise SandboxException("lis serve did not answer on %s within %.0f s" % (path, wait))


# What a retried request may have hit: the connection refused, reset or closed
# before a whole answer came (the server restarting, a dropped socket). Not a
# timeout: a server that did not answer in time is not asked again.
_RETRYABLE = (OSError, http.client.HTTPException)
RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0)
# How long a request waits for the server at most (seconds without a byte of
# its answer): a stuck server gives an error, never a hang. Generous: a
# snapshot of a big sandbox is one request. An exec's stream waits as long as
# its command may run, plus EXEC_GRACE.
REQUEST_TIMEOUT = 600.0
EXEC_GRACE = 60.0


def _timed_out(path, timeout):
    return TimeoutException("lis serve on %s did not answer within %.0f s" % (path, timeout))


class Client:
    """One request per connection (simple and safe across threads). socket_path:
    the unix socket's path (or unix://PATH), tcp://HOST:PORT (mutual TLS with
    LIS_CERT_PATH's files) or http://HOST:PORT (a server run with
    --tcp-no-auth-insecure); None: LIS_SOCKET or the user's default socket, where
    a server is started when none answers. timeout: seconds a request waits for
    the server (None: REQUEST_TIMEOUT). cert_dir: tcp://'s TLS files (None:
    cert_path(), from the environment)."""

    def __init__(self, socket_path=None, start=True, timeout=None, cert_dir=None):
        self.socket_path = socket_path or default_socket()
        self._addr = _address(self.socket_path)
        self._start = start and self._addr[0] == "unix"
        self._tls = _tls_context(cert_dir or cert_path()) if self._addr[0] == "tcp" else None
        # the Popen of a server we started
        self.started = ensure_server(self._addr[1], start) if self._addr[0] == "unix" else None
        self.timeout = REQUEST_TIMEOUT if timeout is None else timeout

    def _connection(self, timeout):
        a = self._addr
        if a[0] == "unix":
            return _UnixConnection(a[1], timeout)
        if a[0] == "tcp":
            return http.client.HTTPSConnection(a[1], a[2], timeout=timeout, context=self._tls)
        return http.client.HTTPConnection(a[1], a[2], timeout=timeout)

    def _send(self, method, url, body, headers, timeout):
        """timeout: None for the client's, 0 for none. An auto-started server that
        has exited for idleness meanwhile is started again (once)."""
        t = self.timeout if timeout is None else timeout
        try:
            return self._send_once(method, url, body, headers, t)
        except (FileNotFoundError, ConnectionRefusedError):
            if not self._start:
                raise
            self.started = ensure_server(self._addr[1], True) or self.started
            return self._send_once(method, url, body, headers, t)

    def _send_once(self, method, url, body, headers, t):
        conn = self._connection(t or None)
        hdrs = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, url, body=body, headers=hdrs)
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    @staticmethod
    def _error(resp, conn):
        data = resp.read()
        conn.close()
        try:
            msg = json.loads(data)["message"]
        except (ValueError, KeyError, TypeError):
            msg = data.decode(errors="replace").strip() or resp.reason
        return from_status(resp.status, msg)

    def open(self, method, path, body=None, headers=None, timeout=None, prefix="/lis/v1/"):
        """Sends a request once; returns the HTTPResponse (raises on an error status).
        path is under prefix (the native API; "/" for the Docker-compatible one)."""
        try:
            conn, resp = self._send(method, prefix + path, body, headers, timeout)
        except socket.timeout:
            raise _timed_out(self.socket_path, self.timeout if timeout is None else timeout)
        except _RETRYABLE as e:
            raise SandboxException("talking to lis serve on %s: %s" % (self.socket_path, e))
        if resp.status >= 400:
            raise self._error(resp, conn)
        resp._lis_conn = conn
        return resp

    def call(self, method, path, body=None, headers=None, raw=False, retry=False,
             prefix="/lis/v1/", timeout=None):
        """One whole request. With retry (a request that is safe to send again: a
        GET, or one carrying an Idempotency-Key), a connection error before the
        whole answer is read sends it again, with the same headers, after a short
        wait (RETRY_DELAYS); so does a 409 to such a retry (the first attempt is
        still being made on the server). timeout: seconds this request waits
        for the answer (None: the client's; a long-poll's wait plus a grace)."""
        attempt = 0
        while True:
            try:
                conn, resp = self._send(method, prefix + path, body, headers, timeout)
                try:
                    if resp.status >= 400:
                        err = self._error(resp, conn)
                        if not (retry and attempt > 0 and resp.status == 409
                                and attempt < len(RETRY_DELAYS)):
                            raise err
                        data = None
                    else:
                        data = resp.read()
                finally:
                    conn.close()
            except socket.timeout:
                raise _timed_out(self.socket_path, self.timeout if timeout is None else timeout)
            except _RETRYABLE as e:
                if not retry or attempt >= len(RETRY_DELAYS):
                    raise SandboxException("talking to lis serve on %s: %s"
                                           % (self.socket_path, e))
                data = None
            if data is not None:
                if raw:
                    return data
                return json.loads(data) if data else None
            time.sleep(RETRY_DELAYS[attempt])
            attempt += 1


def sse(resp):
    """Yields (id, event, data) of a server-sent event stream: data parsed as
    JSON, id an int (None when absent or not a number); comments and other
    fields skipped."""
    eid, name, data = None, None, []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.rstrip(b"\r\n")
        if not line:
            if name is not None or data:
                yield eid, name or "message", json.loads(b"\n".join(data) or b"null")
            eid, name, data = None, None, []
            continue
        key, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if key == b"id":
            eid = int(value) if value.strip().isdigit() else None
        elif key == b"event":
            name = value.strip().decode()
        elif key == b"data":
            data.append(value)


def events(resp):
    """Yields (event, data) of a server-sent event stream, data parsed as JSON."""
    for _, name, data in sse(resp):
        yield name, data
