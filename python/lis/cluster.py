"""lis.Cluster: the episodes API of many `lis serve`, one per node, as one
(docs/rl.md, "Many services: lis.Cluster").

Groups go to the service with the most room (its rl/status `free`, less its
queued episodes and what this client put there since); a group whose service
dies under it is submitted again on another, and its GroupResult says so
(`endpoint`, `retries`). Each group of a step ends exactly once.

    cl = lis.Cluster(endpoints_file="/shared/run/endpoints.json")
    step = cl.collect([body, body, ...], deadline_s=900)
    for g in step:
        print(g.endpoint, g.retries, g.rewards)
"""
import concurrent.futures
import json
import os
import threading
import time
from typing import Any, Dict, List, Optional

from ._http import _address
from .episodes import BODY_KEYS, MAX_POLL, Episodes, GroupResult, StepResult, _body
from .errors import SandboxException

# An endpoints file is small: refused past this size.
MAX_FILE = 1 << 20
# Seconds a request without a wait may take (the timeout argument's default):
# a node that does not answer in time is lost to its groups, which move on.
REQUEST_TIMEOUT = 60.0
# Seconds an rl/status read may take before its service counts as dead.
STATUS_TIMEOUT = 10.0
# Statuses older than this are read again before a group is placed.
STATUS_MAX_AGE = 1.0
# Threads of collect() (one submit or one long-poll each).
MAX_THREADS = 32
# An error's text in a retry record or a status: one line, bounded.
MAX_LINE = 400


def _line(e):
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 3] + "..."


def _gone(e):
    """Whether e says the service is gone (or cannot take more) rather than
    refusing the request: no answer at all (refused, reset, closed, timed out
    after the client's own retries), a full queue (429) or a server error (a
    stopping server answers its long-polls 503)."""
    return e.status is None or e.status == 429 or e.status >= 500


def load_endpoints(path):
    """(endpoints, cert_path or None) of an endpoints file:
    {"endpoints": ["tcp://HOST:PORT", ...], "cert_path": DIR} (other keys
    ignored; a relative cert_path is the file's directory's)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
    except OSError as e:
        raise SandboxException("endpoints file %s: %s" % (path, e.strerror or e)) from None
    if len(data) > MAX_FILE:
        raise SandboxException("endpoints file %s: larger than %d bytes" % (path, MAX_FILE))
    try:
        doc = json.loads(data.decode("utf-8"))
    except ValueError as e:
        raise SandboxException("endpoints file %s: not JSON: %s" % (path, _line(e))) from None
    eps = doc.get("endpoints") if isinstance(doc, dict) else None
    if not isinstance(eps, list) or not eps or not all(isinstance(x, str) and x for x in eps):
        raise SandboxException('endpoints file %s: want {"endpoints": ["tcp://HOST:PORT", ...]}'
                               " (a non-empty list of strings)" % path)
    cert = doc.get("cert_path")
    if cert is not None and not (isinstance(cert, str) and cert):
        raise SandboxException("endpoints file %s: cert_path: want a directory's path" % path)
    if cert:
        cert = os.path.join(os.path.dirname(os.path.abspath(path)), cert)
    return eps, cert


class _Endpoint:
    """One service as this client sees it: its last rl/status (None: dead or
    not read yet, with error), the episodes placed there since that read, the
    groups submit() placed there since, and collect()'s groups running there."""

    def __init__(self, addr):
        self.addr = addr
        self.eps = None
        self.status = None
        self.error = "not read yet"
        self.placed = 0
        self.loose = 0
        self.inflight = 0

    def room(self):
        queued = (self.status.get("episodes") or {}).get("queued") or 0
        return self.status["free"] - queued - self.placed


class Cluster:
    """Many `lis serve` (docs/rl.md, "Many services"). endpoints: their
    addresses as lis.Episodes takes them (a unix socket path, unix://PATH,
    tcp://HOST:PORT with mutual TLS, http://HOST:PORT); or endpoints_file: a
    JSON file {"endpoints": [...], "cert_path": DIR} (exactly one of the
    two). cert_path: tcp://'s client certificate directory (over the file's;
    neither: LIS_CERT_PATH, else DOCKER_CERT_PATH). timeout: seconds a
    request without a wait may take, and a long-poll past its wait (None:
    REQUEST_TIMEOUT; a status read takes STATUS_TIMEOUT at most). No server
    is ever started."""

    def __init__(self, endpoints: Optional[List[str]] = None, *,
                 endpoints_file: Optional[str] = None, cert_path: Optional[str] = None,
                 timeout: Optional[float] = None):
        if (endpoints is None) == (endpoints_file is None):
            raise SandboxException("lis.Cluster: give endpoints or endpoints_file (one of them)")
        file_cert = None
        if endpoints_file is not None:
            endpoints, file_cert = load_endpoints(endpoints_file)
        elif (isinstance(endpoints, str) or not endpoints
              or not all(isinstance(x, str) and x for x in endpoints)):
            raise SandboxException("lis.Cluster: endpoints: want a non-empty list of addresses")
        endpoints = list(endpoints)
        for i, a in enumerate(endpoints):
            _address(a)  # a malformed tcp:// or http:// is refused here
            if a in endpoints[:i]:
                raise SandboxException("lis.Cluster: endpoint %s given twice" % a)
        self.cert_path = cert_path or file_cert
        self.timeout = REQUEST_TIMEOUT if timeout is None else timeout
        self._eps = [_Endpoint(a) for a in endpoints]
        self._lock = threading.Lock()  # the endpoints' counts and statuses
        self._reading = threading.Lock()  # one refresh at a time
        self._read_at = None

    @property
    def endpoints(self) -> List[str]:
        return [ep.addr for ep in self._eps]

    def episodes(self, endpoint: str) -> Episodes:
        """The lis.Episodes of one endpoint (e.g. to poll what submit() put there)."""
        for ep in self._eps:
            if ep.addr == endpoint:
                return self._client(ep)
        raise SandboxException("lis.Cluster: no endpoint %s (it has %s)"
                               % (endpoint, ", ".join(self.endpoints)))

    def _client(self, ep):
        if ep.eps is None:  # made on first use: a dead unix endpoint refuses it
            eps = Episodes(ep.addr, timeout=self.timeout, start=False, cert_path=self.cert_path)
            # a long-poll silent past its wait for longer than timeout: the node is lost
            eps.poll_grace = min(eps.poll_grace, self.timeout)
            ep.eps = eps
        return ep.eps

    # ---- statuses --------------------------------------------------------
    def _read(self, ep):
        t = min(self.timeout, STATUS_TIMEOUT)
        try:
            # once, not retried: a service that does not answer now is skipped
            doc = self._client(ep)._client.call("GET", "rl/status", timeout=t)
            if not isinstance(doc, dict) or not isinstance(doc.get("free"), (int, float)):
                raise SandboxException("rl/status has no free")
            return doc, None
        except (SandboxException, ValueError) as e:
            return None, _line(e)

    def _refresh(self):
        with self._lock:
            before = [ep.placed for ep in self._eps]
            looses = [ep.loose for ep in self._eps]
        with concurrent.futures.ThreadPoolExecutor(min(len(self._eps), MAX_THREADS)) as pool:
            got = list(pool.map(self._read, self._eps))
        with self._lock:
            # what was placed while reading may not be in the status yet: kept
            for ep, (doc, err), p, lo in zip(self._eps, got, before, looses):
                ep.status, ep.error = doc, err
                ep.placed, ep.loose = max(0, ep.placed - p), max(0, ep.loose - lo)
            self._read_at = time.monotonic()
        return got

    def _refresh_if_stale(self, force=False):
        with self._reading:
            if force or self._read_at is None or \
                    time.monotonic() - self._read_at >= STATUS_MAX_AGE:
                self._refresh()

    def status(self) -> List[Dict[str, Any]]:
        """Each endpoint's GET rl/status now, in order: {"endpoint", "ok": True,
        "status": {...}} or {"endpoint", "ok": False, "error": "..."}."""
        with self._reading:
            got = self._refresh()
        return [{"endpoint": ep.addr, "ok": True, "status": doc} if doc is not None
                else {"endpoint": ep.addr, "ok": False, "error": err}
                for ep, (doc, err) in zip(self._eps, got)]

    # ---- placing a group -------------------------------------------------
    def _pick(self, n, failed):
        """The live endpoint with the most room not in failed; its counts
        taken for n episodes. None when none is left."""
        self._refresh_if_stale()
        with self._lock:
            best = None
            for i, ep in enumerate(self._eps):
                if ep.status is None or ep.addr in failed:
                    continue
                key = (-ep.room(), ep.inflight + ep.loose, i)
                if best is None or key < best[0]:
                    best = (key, ep)
            if best is None:
                return None
            best[1].placed += n
            return best[1]

    def _down(self, ep, n, err):
        """ep did not take n episodes (err: why; None: it refused the body)."""
        with self._lock:
            ep.placed = max(0, ep.placed - n)
            if err is not None:
                ep.status, ep.error = None, err

    def _none_left(self, failed):
        with self._lock:
            why = ["%s: %s" % (ep.addr, failed.get(ep.addr) or ep.error or "busy")
                   for ep in self._eps]
        return SandboxException("no lis serve left to take the group (%s)" % "; ".join(why))

    def _place(self, body, failed, retries):
        """(endpoint, the server's answer) of body submitted where there is
        most room; an endpoint gone meanwhile is recorded in failed and
        retries and the next one tried, each at most once. A refused body
        raises the server's error."""
        n = body.get("n", 1) if isinstance(body, dict) else 1
        n = n if isinstance(n, int) and n > 0 else 1
        while True:
            ep = self._pick(n, failed)
            if ep is None:
                raise self._none_left(failed)
            try:
                # without a request_id, a new one each attempt (Episodes.submit's)
                return ep, self._client(ep).submit(body)
            except SandboxException as e:
                if not _gone(e):
                    self._down(ep, n, None)
                    raise
                failed[ep.addr] = _line(e)
                self._down(ep, n, failed[ep.addr])
                retries.append({"endpoint": ep.addr, "group_id": None, "error": failed[ep.addr]})

    def submit(self, body: Optional[Dict[str, Any]] = None, **kw) -> Dict[str, Any]:
        """POST groups on the endpoint with the most room: the server's answer
        ({"group_id", "episode_ids"}) plus "endpoint". Arguments as
        Episodes.submit()'s; without a request_id each attempt makes its own.
        Raises the server's error for a refused body, and SandboxException
        naming every endpoint when none can take it."""
        doc = _body("submit", "group", BODY_KEYS, body, kw)
        if "request_id" not in kw and "request_id" not in (body or {}):
            del doc["request_id"]
        ep, ans = self._place(doc, {}, [])
        with self._lock:
            ep.loose += 1
        return dict(ans, endpoint=ep.addr)

    # ---- a whole step ----------------------------------------------------
    def collect(self, bodies: List[Dict[str, Any]], deadline_s: Optional[float] = None,
                poll_s: float = MAX_POLL, cancel_stragglers: bool = False,
                threads: int = MAX_THREADS) -> StepResult:
        """Episodes.collect() over every endpoint: each body placed where there
        is most room, then long-polled (a thread per group, at most threads)
        until done or deadline_s. A group whose endpoint dies (no answer after
        the client's retries) or stops under it is submitted again elsewhere
        (the same body; a new request_id unless the body has one) with a
        record {"endpoint", "group_id", "error"} in its .retries; .endpoint,
        .group_id and .episode_ids name where it ran last. A body refused
        (4xx) is its .error, not tried elsewhere; so is "no lis serve left".
        Past the deadline a group is not submitted again."""
        t0 = time.monotonic()
        end = None if deadline_s is None else t0 + deadline_s
        out = [GroupResult(i, labels=(b or {}).get("labels")) for i, b in enumerate(bodies)]
        where = [None] * len(bodies)  # each group's _Endpoint
        failed = [{} for _ in bodies]  # per group: the endpoints that died under it

        def past():
            return end is not None and time.monotonic() >= end

        def place(i):
            g = out[i]
            try:
                ep, ans = self._place(bodies[i], failed[i], g.retries)
            except SandboxException as e:
                g.error = e
                return
            with self._lock:
                ep.inflight += 1
            where[i] = ep
            g.endpoint, g.group_id = ep.addr, ans["group_id"]
            g.episode_ids, g.episodes, g.done = list(ans["episode_ids"]), [], False

        def lost(i, why):
            """Group i's endpoint is gone (why): on to another, or its error."""
            g, ep = out[i], where[i]
            failed[i][ep.addr] = why
            g.retries.append({"endpoint": ep.addr, "group_id": g.group_id, "error": why})
            with self._lock:
                ep.inflight -= 1
                ep.status, ep.error = None, why
            where[i] = None
            g.group_id, g.episode_ids, g.episodes, g.done = None, [], [], False
            if past():
                g.error = SandboxException("lis serve on %s: %s (past the step's deadline: not "
                                           "submitted again)" % (ep.addr, why))
            else:
                place(i)

        def poll(i, wait):
            """One long-poll of group i; True when it went elsewhere."""
            g = out[i]
            try:
                Episodes._take(g, self._client(where[i]).results(g.group_id, wait=wait))
            except SandboxException as e:
                if not _gone(e):
                    g.error = e
                    return False
                lost(i, _line(e))
                return True
            return False

        def follow(i):
            g = out[i]
            while g.group_id is not None and g.error is None:
                left = None if end is None else end - time.monotonic()
                wait = poll_s if left is None else max(0.0, min(poll_s, left))
                if poll(i, wait):
                    continue
                if g.done or past():
                    break

        def cancel(i):
            g = out[i]
            try:
                self._client(where[i]).cancel_group(g.group_id)
            except SandboxException as e:
                g.error = e
                return
            poll(i, poll_s)  # cancelled episodes end at once: their partial turns

        self._refresh_if_stale(force=True)
        workers = max(1, min(threads, len(bodies)))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(place, range(len(bodies))))
            list(pool.map(follow, range(len(bodies))))
            late = [g.index for g in out
                    if g.group_id is not None and g.error is None and not g.done]
            if late and cancel_stragglers:
                list(pool.map(cancel, late))
        with self._lock:
            for ep in where:
                if ep is not None:
                    ep.inflight -= 1
        return StepResult(out, time.monotonic() - t0)
