"""lis.Episodes: lis serve as a rollout service for RL trainers (docs/rl.md).

A group is one task run as n episodes against the trainer's own OpenAI-compatible
endpoint; results come back with the endpoint's token ids, each step's effects, the
reward and the timing. Results are the server's JSON, as dicts (docs/rl.md, "An
episode's result"); this module adds no field of its own to them.

    eps = lis.Episodes()
    g = eps.submit(task={...}, n=8, inference={...}, max_steps=40)
    res = eps.results(g["group_id"], wait=60)     # {"done", "episodes": [...]}
    step = eps.collect([body, body, ...], deadline_s=900)   # a GRPO step
"""
import concurrent.futures
import http.client
import socket
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional

from ._http import RETRY_DELAYS, Client
from ._http import sse as _sse
from .errors import SandboxException, TimeoutException

# Seconds a long-poll's connection may stay silent past its wait before the
# client gives up on the server (the server answers at `wait` at the latest).
POLL_GRACE = 30.0
# One long-poll asks for at most this many seconds (collect() polls again).
MAX_POLL = 60.0
# The statuses of an episode not finished yet (docs/rl.md).
PENDING = ("queued", "setup", "running", "scoring")
# A group body's keys (docs/rl.md, "A group's body"): submit() takes them as
# keyword arguments. The server refuses an unknown key with its name; the
# client refuses one before sending (a typo is not a silent default).
BODY_KEYS = ("request_id", "task", "n", "inference", "max_steps", "deadline_s",
             "tool_timeout_s", "keep_snapshots", "labels", "effects")
# Step mode's body (docs/rl.md, "Step mode"): a group's without inference, plus
# the idle timeout.
ENV_KEYS = tuple(k for k in BODY_KEYS if k != "inference") + ("idle_timeout_s",)


def _q(part):
    return urllib.parse.quote(str(part), safe="")


def _body(what, noun, keys, body, kw):
    """A body of body's keys and the keyword arguments (which win); an unknown
    keyword is refused before sending (a typo is not a silent default); a
    request_id (a uuid4) when none is given, so that a retry makes nothing twice."""
    unknown = sorted(set(kw) - set(keys))
    if unknown:
        raise TypeError("%s(): unknown %s key %s (docs/rl.md names %s)"
                        % (what, noun, ", ".join(unknown), ", ".join(keys)))
    doc = dict(body or {})
    doc.update(kw)
    doc.setdefault("request_id", str(uuid.uuid4()))
    return doc


def _wait_query(wait):
    if wait is None:
        return ""
    if wait < 0:
        raise ValueError("wait must be >= 0 seconds, not %r" % (wait,))
    return "?wait=%g" % wait


@dataclass
class Event:
    """One server-sent event of an episode: `step`, `reward` or `final`; data is
    the event's JSON (a turn, the reward, the whole result)."""
    id: Optional[int]
    event: str
    data: Any


def sse(resp):
    """Yields the Events of a text/event-stream."""
    for eid, name, data in _sse(resp):
        yield Event(eid, name, data)


@dataclass
class GroupResult:
    """One group of a collected step: its episodes' results in the order of
    episode_ids (index 0..n-1); an episode not finished by the deadline is
    there as the server listed it ({"episode_id", "status": "running"...}).
    error: the exception that stopped it: its submit refused (then group_id
    is None and episodes is empty), or a poll or cancel that failed (then
    episodes is what the last poll gave). endpoint and retries are
    lis.Cluster's (docs/rl.md, "Many services"): the service the group ran
    on, and one {"endpoint", "group_id", "error"} per service that died
    under it (or could not take it) before."""
    index: int
    group_id: Optional[str] = None
    episode_ids: List[str] = field(default_factory=list)
    episodes: List[Dict[str, Any]] = field(default_factory=list)
    done: bool = False
    error: Optional[SandboxException] = None
    labels: Any = None
    endpoint: Optional[str] = None
    retries: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def stragglers(self) -> List[str]:
        """The ids of its episodes that had not finished when it was collected."""
        return [e.get("episode_id") for e in self.episodes if e.get("status") in PENDING]

    @property
    def rewards(self) -> List[Optional[float]]:
        return [e.get("reward") for e in self.episodes]


class StepResult(list):
    """What collect() returns: a GroupResult per body given, in the input's
    order; .done (every group finished), .stragglers ([(group index,
    episode_id)...] not finished at the deadline), .errors ([(group index,
    exception)...] of groups not made), .wall_s (submit to return)."""

    def __init__(self, items, wall_s):
        super().__init__(items)
        self.wall_s = wall_s

    @property
    def done(self) -> bool:
        return all(g.done for g in self)

    @property
    def stragglers(self):
        return [(g.index, e) for g in self for e in g.stragglers]

    @property
    def errors(self):
        return [(g.index, g.error) for g in self if g.error is not None]


class Episodes:
    """The episodes API of one lis serve (docs/rl.md). socket: as lis.Sandbox's
    (a unix socket path, tcp://HOST:PORT with mutual TLS, http://HOST:PORT;
    None: LIS_SOCKET or the user's default, started when none answers);
    timeout: seconds a request without a wait may take (None: the client's);
    cert_path: the directory of tcp://'s ca.pem, cert.pem and key.pem (None:
    LIS_CERT_PATH, else DOCKER_CERT_PATH)."""

    def __init__(self, socket: Optional[str] = None, timeout: Optional[float] = None,
                 start: bool = True, cert_path: Optional[str] = None):
        self._client = Client(socket, start=start, timeout=timeout, cert_dir=cert_path)
        # seconds a long-poll may stay silent past its wait (lis.Cluster's: shorter)
        self.poll_grace = POLL_GRACE

    @property
    def socket_path(self) -> str:
        return self._client.socket_path

    # ---- groups ----------------------------------------------------------
    def submit(self, body: Optional[Dict[str, Any]] = None, **kw) -> Dict[str, Any]:
        """POST /lis/v1/groups: a group of n episodes of one task, answered at
        once with {"group_id", "episode_ids"}. The body is a dict, or its keys
        as keyword arguments (task=, n=, inference=, max_steps=, deadline_s=,
        tool_timeout_s=, keep_snapshots=, labels=, effects=, request_id=), or
        both (keywords override). Without a request_id the client makes one
        (a uuid4), so that a connection dropped before the answer is retried
        without making the group twice, as Sandbox.create's Idempotency-Key."""
        return self._client.call("POST", "groups", _body("submit", "group", BODY_KEYS, body, kw),
                                 retry=True)

    def group(self, group_id: str) -> Dict[str, Any]:
        """GET /lis/v1/groups/{id}: status, episode_ids, labels, counts."""
        return self._client.call("GET", "groups/%s" % _q(group_id), retry=True)

    def results(self, group_id: str, wait: Optional[float] = None) -> Dict[str, Any]:
        """GET /lis/v1/groups/{id}/results?wait=S: {"group_id", "done", "episodes"}
        with the finished episodes' results and the others as {"episode_id",
        "status"}; the server answers once all are done or after wait seconds."""
        return self._client.call("GET", "groups/%s/results%s" % (_q(group_id), _wait_query(wait)),
                                 retry=True, timeout=self._poll_timeout(wait))

    def cancel_group(self, group_id: str) -> Dict[str, Any]:
        """POST /lis/v1/groups/{id}/cancel: every episode not finished is ended
        (status cancelled, partial turns kept). Idempotent."""
        return self._client.call("POST", "groups/%s/cancel" % _q(group_id), {}, retry=True)

    # ---- episodes --------------------------------------------------------
    def episode(self, episode_id: str, wait: Optional[float] = None) -> Dict[str, Any]:
        """GET /lis/v1/episodes/{id}?wait=S: its result once finished (or, after
        wait seconds, what it is: {"episode_id", "status": "running", ...})."""
        return self._client.call("GET", "episodes/%s%s" % (_q(episode_id), _wait_query(wait)),
                                 retry=True, timeout=self._poll_timeout(wait))

    def cancel(self, episode_id: str) -> Dict[str, Any]:
        """POST /lis/v1/episodes/{id}/cancel (idempotent)."""
        return self._client.call("POST", "episodes/%s/cancel" % _q(episode_id), {}, retry=True)

    def branch(self, episode_id: str, at_step: int, n: int = 1,
               sampling: Optional[Dict[str, Any]] = None,
               seeds: Optional[List[int]] = None) -> Dict[str, Any]:
        """POST /lis/v1/episodes/{id}/branch: n episodes that keep its turns
        0..at_step-1 and its files after turn at_step-1 (kept by the group's
        keep_snapshots), and make turn at_step anew: {"episode_ids": [...]}
        (a group of their own: "group_id").
        Sent once (the API names no idempotency key for a branch)."""
        body = {"at_step": int(at_step), "n": int(n)}
        if sampling is not None:
            body["sampling"] = sampling
        if seeds is not None:
            body["seeds"] = list(seeds)
        return self._client.call("POST", "episodes/%s/branch" % _q(episode_id), body)

    def delete(self, episode_id: str) -> None:
        """DELETE /lis/v1/episodes/{id}: forgets a finished episode, its result
        and its kept snapshots (ConflictException while it runs)."""
        self._client.call("DELETE", "episodes/%s" % _q(episode_id), raw=True)

    def events(self, episode_id: str, last_event_id: Optional[int] = None,
               idle_timeout: Optional[float] = None) -> Iterator[Event]:
        """GET /lis/v1/episodes/{id}/events: yields its Events (step, reward,
        final) until the final one. A stream that ends or drops before it is
        opened again with Last-Event-ID (the last id seen, else last_event_id),
        so no event is seen twice or missed; where the episode has finished
        meanwhile and the server has no event after that id (a restarted server
        keeps results, not events), the final event is its result (GET
        episodes/ID) with id None. A few attempts in a row without a new event
        (RETRY_DELAYS) end it with SandboxException. idle_timeout:
        seconds the stream may stay silent (None: the client's timeout)."""
        last = last_event_id
        attempt = 0
        while True:
            hdrs = {"Accept": "text/event-stream"}
            if last is not None:
                hdrs["Last-Event-ID"] = str(last)
            progressed = False
            try:
                resp = self._client.open("GET", "episodes/%s/events" % _q(episode_id),
                                         headers=hdrs, timeout=idle_timeout)
                try:
                    for ev in sse(resp):
                        if ev.id is not None:
                            if last is not None and ev.id <= last:
                                continue  # a server resending what was seen
                            last = ev.id
                        progressed = True
                        yield ev
                        if ev.event == "final":
                            return
                finally:
                    resp._lis_conn.close()
            except (socket.timeout, TimeoutException):
                raise TimeoutException("the events of episode %s: nothing for %s s"
                                       % (episode_id, idle_timeout or self._client.timeout))
            except (OSError, http.client.HTTPException, SandboxException) as e:
                if isinstance(e, SandboxException) and e.status is not None:
                    raise  # the server's answer (404, 400...): not a dropped stream
                why = e
            else:
                why = "the stream ended before its final event"
            # an episode that finished meanwhile, whose events the server no longer
            # has (a restart keeps the result only): its result is the final event
            try:
                res = self.episode(episode_id)
            except SandboxException:
                res = None
            if isinstance(res, dict) and res.get("status") not in PENDING + (None,):
                yield Event(None, "final", res)
                return
            attempt = 0 if progressed else attempt + 1
            if attempt > len(RETRY_DELAYS):
                raise SandboxException("the events of episode %s: %s (after %d attempts)"
                                       % (episode_id, why, attempt))
            time.sleep(RETRY_DELAYS[attempt - 1] if attempt else 0)

    # ---- step mode: the trainer calls the model -------------------------
    def create_envs(self, body: Optional[Dict[str, Any]] = None, wait: Optional[float] = None,
                    **kw) -> Dict[str, Any]:
        """POST /lis/v1/envs: n envs of one task (a group's body without
        inference, plus idle_timeout_s), each waiting for the trainer's
        actions. Without wait: {"group_id", "env_ids"} at once; with wait=S:
        also "observation" (the first messages) once every env waits. The keys
        as submit()'s (a request_id is made when none is given)."""
        return self._client.call("POST", "envs%s" % _wait_query(wait),
                                 _body("create_envs", "env", ENV_KEYS, body, kw), retry=True,
                                 timeout=self._poll_timeout(wait))

    def step(self, env_id: str, action: Any, wait: Optional[float] = None) -> Dict[str, Any]:
        """POST /lis/v1/envs/{id}/step: the model's turn (an assistant message
        with tool_calls, or raw text) -> {"observations", "done", "info"} once
        the env waits again or ended (the server long-polls up to wait, 600 s
        by default). Sent once: a step is not idempotent."""
        return self._client.call("POST", "envs/%s/step%s" % (_q(env_id), _wait_query(wait)),
                                 {"action": action},
                                 timeout=self._poll_timeout(600.0 if wait is None else wait))

    def reward(self, env_id: str) -> Dict[str, Any]:
        """POST /lis/v1/envs/{id}/reward: the task's scorer on the env's answer
        file now: {"reward", "reward_info"} (ConflictException unless it waits
        and its task has a reward)."""
        return self._client.call("POST", "envs/%s/reward" % _q(env_id), {})

    def branch_env(self, env_id: str, n: int = 1) -> Dict[str, Any]:
        """POST /lis/v1/envs/{id}/branch: n new envs from its files and history
        now: {"group_id", "env_ids"}."""
        return self._client.call("POST", "envs/%s/branch" % _q(env_id), {"n": int(n)})

    def env(self, env_id: str) -> Dict[str, Any]:
        """GET /lis/v1/envs/{id}: phase, waiting, done, steps, status,
        observation (while it waits)."""
        return self._client.call("GET", "envs/%s" % _q(env_id), retry=True)

    def delete_env(self, env_id: str) -> None:
        """DELETE /lis/v1/envs/{id}: ends it (status cancelled); its result is
        kept as an episode's (episode(), delete())."""
        self._client.call("DELETE", "envs/%s" % _q(env_id), raw=True, retry=True)

    # ---- the service -----------------------------------------------------
    def status(self) -> Dict[str, Any]:
        """GET /lis/v1/rl/status: groups and episodes per stage, sandboxes,
        memory_bytes, max_live, weight_version, endpoints."""
        return self._client.call("GET", "rl/status", retry=True)

    def set_inference(self, endpoints: List[Dict[str, Any]],
                      weight_version: Optional[str] = None) -> Dict[str, Any]:
        """PUT /lis/v1/rl/inference: later turns go to these endpoints
        ([{"base_url", "model", "api_key"}...]) and are stamped with
        weight_version (between training steps)."""
        body = {"endpoints": list(endpoints)}
        if weight_version is not None:
            body["weight_version"] = weight_version
        return self._client.call("PUT", "rl/inference", body, retry=True)

    # ---- a whole step ----------------------------------------------------
    def collect(self, bodies: List[Dict[str, Any]], deadline_s: Optional[float] = None,
                poll_s: float = MAX_POLL, cancel_stragglers: bool = False,
                submit_threads: int = 8) -> StepResult:
        """A GRPO step: every group body submitted at once, then their results
        long-polled until all are done or deadline_s (seconds from the call; None:
        no deadline) has passed; returns a StepResult with a GroupResult per
        body, in the order given. At the deadline, what is not done is listed
        (.stragglers) with the server's status; cancel_stragglers=True also
        cancels those groups and returns their partial results (status
        cancelled). A body the server refuses, or a group whose results cannot
        be had, is that group's .error (the others go on). Bodies are dicts as
        submit() takes them."""
        t0 = time.monotonic()
        end = None if deadline_s is None else t0 + deadline_s
        out = [GroupResult(i, labels=(b or {}).get("labels")) for i, b in enumerate(bodies)]

        def one(i):
            try:
                g = self.submit(bodies[i])
                out[i].group_id, out[i].episode_ids = g["group_id"], list(g["episode_ids"])
            except SandboxException as e:
                out[i].error = e
        workers = max(1, min(submit_threads, len(bodies)))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(len(bodies))))
        # the step ends when its last group does: long-poll the groups in order,
        # each up to the deadline; groups that finished meanwhile answer at once
        for g in out:
            while g.group_id is not None and g.error is None:
                left = None if end is None else end - time.monotonic()
                wait = poll_s if left is None else max(0.0, min(poll_s, left))
                self._poll(g, wait)
                if g.done or (end is not None and time.monotonic() >= end):
                    break
        late = [g for g in out if g.group_id is not None and g.error is None and not g.done]
        if late and cancel_stragglers:
            for g in late:
                try:
                    self.cancel_group(g.group_id)
                except SandboxException as e:
                    g.error = e
            for g in late:  # cancelled episodes end at once: their partial turns
                if g.error is None:
                    self._poll(g, poll_s)
        return StepResult(out, time.monotonic() - t0)

    def _poll(self, g, wait):
        """One long-poll of g's results; an error (the group gone, the server
        unreachable after the retries) is g's, the other groups go on."""
        try:
            self._take(g, self.results(g.group_id, wait=wait))
        except SandboxException as e:
            g.error = e

    @staticmethod
    def _take(g, doc):
        by_id = {e.get("episode_id"): e for e in doc.get("episodes") or []}
        # an episode deleted meanwhile is no longer listed: its place is kept
        g.episodes = [by_id.get(i, {"episode_id": i, "status": "missing"}) for i in g.episode_ids]
        g.done = bool(doc.get("done")) and not g.stragglers

    def _poll_timeout(self, wait):
        if wait is None:
            return None
        return wait + self.poll_grace
