"""NVIDIA ProRL Agent Server's HTTP API on lis's episodes API (docs/rl.md,
"Trainers: the adapters"), so that a NeMo RL set-up points at lis instead:

    python -m lis.prorl --listen 127.0.0.1:8006 [--socket PATH] [--timeout S]

Contract read from NVIDIA-NeMo/ProRL-Agent-Server@40c1d8a6 (scripts/
start_server.py; reference notes rl-trainers.md §1.1): POST /start, /stop,
GET /status, POST /process {instance, sampling_params, job_id?} (blocks until
the job ends), /cancel {job_id}, /add_llm_server {address}, /clear_llm_server.

A /process is one episode (a group of n=1): the instance is the task
(problem_statement or prompt, or messages; input_files or files; image, setup,
answer_file; ground_truth with scorer, builtin:match by default), the first LLM
server its endpoint (all of them through PUT rl/inference, which spreads the
turns). sampling_params: max_iterations is max_steps, model and api_key the
endpoint's, token_level_generation asks for token ids and logprobs;
native_tool_calling and custom_tokenizer are ProRL's own and dropped; the rest
goes to the endpoint unchanged. The result: messages (each assistant message
with token_ids, input_ids and logprobs of its turn), resolved (reward >= 1),
critical_error ("init" | "run" | "eval" | "timeout" | null, from lis's status
and error_stage), filter (lis's, or any critical_error, as ProRL), timing
{init, run, eval}, and lis's own result under "lis".
"""
import argparse
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

from .episodes import Episodes
from .errors import SandboxException

MAX_BODY = 16 << 20  # bytes of a request body
POLL_S = 60.0
PENDING = ("queued", "setup", "running", "scoring")
# ProRL's agent keys of sampling_params that are not the model's
DROPPED = ("native_tool_calling", "custom_tokenizer", "token_level_generation",
           "max_iterations", "model", "api_key")
STAGES = {"setup": "init", "run": "run", "reward": "eval"}


class HTTPError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def v1(address: str) -> str:
    """An LLM server's address as an OpenAI base_url: /v1 added to a bare host."""
    a = address.rstrip("/")
    if not a.startswith(("http://", "https://")):
        a = "http://" + a
    return a if a.count("/") > 2 else a + "/v1"


def task_of(instance: Dict[str, Any]) -> Dict[str, Any]:
    task: Dict[str, Any] = {"id": str(instance.get("instance_id", ""))}
    prompt = instance.get("problem_statement", instance.get("prompt"))
    if isinstance(instance.get("messages"), list):
        task["messages"] = instance["messages"]
    elif isinstance(prompt, str) and prompt:
        task["prompt"] = prompt
    else:
        raise HTTPError(400, "instance needs a problem_statement, a prompt or messages")
    files = instance.get("input_files", instance.get("files"))
    if files:
        task["files"] = files
    for k in ("image", "setup", "answer_file"):
        if k in instance:
            task[k] = instance[k]
    if "ground_truth" in instance:
        task["reward"] = {"scorer": instance.get("scorer", "builtin:match"),
                          "ground_truth": instance["ground_truth"]}
    return task


def critical_error(res: Dict[str, Any]) -> Optional[str]:
    status, stage = res.get("status"), res.get("error_stage")
    if status == "timeout":
        return "timeout"
    if status in ("env_error", "model_error", "cancelled") or stage == "reward":
        return STAGES.get(stage, "run")
    return None


def messages_of(res: Dict[str, Any]) -> List[Dict[str, Any]]:
    """lis's messages, each assistant message with its turn's tokens."""
    turns = res.get("turns") or []
    out, k = [], 0
    for m in res.get("messages") or []:
        m = dict(m)
        if m.get("role") == "assistant":
            tok = (turns[k].get("tokens") if k < len(turns) else None) or {}
            m["token_ids"] = tok.get("ids")
            m["input_ids"] = tok.get("prompt_ids")
            m["logprobs"] = tok.get("logprobs")
            k += 1
        out.append(m)
    return out


def result_of(res: Dict[str, Any], instance: Dict[str, Any]) -> Dict[str, Any]:
    crit = critical_error(res)
    t = res.get("timing") or {}
    reward = res.get("reward")
    return {"instance_id": instance.get("instance_id"),
            "trajectory_id": instance.get("trajectory_id"),
            "messages": messages_of(res), "success": res.get("status") == "completed",
            "finish": res.get("status") == "completed", "error": res.get("error"),
            "end_properly": res.get("status") in ("completed", "truncated"),
            "resolved": reward is not None and reward >= 1.0, "reward": reward,
            "critical_error": crit, "filter": bool(res.get("filter")) or crit is not None,
            "timing": {"init": (t.get("queue_s") or 0) + (t.get("setup_s") or 0)
                       + (t.get("fork_s") or 0),
                       "run": t.get("run_s") or 0, "eval": t.get("reward_s") or 0},
            "lis": res}


class Service:
    """The state of one ProRL-shaped server: started, the LLM servers, the jobs."""

    def __init__(self, episodes: Episodes, timeout: float = 0.0, model: str = "policy"):
        self.eps = episodes
        self.timeout = timeout
        self.model = model
        self.lock = threading.Lock()
        self.started = False
        self.servers: List[str] = []
        self.jobs: Dict[str, str] = {}  # job_id -> group_id

    def _push(self):
        self.eps.set_inference([{"base_url": a, "model": self.model} for a in self.servers])

    def start(self, _):
        with self.lock:
            if self.started:
                raise HTTPError(400, "Server is already running")
            self.started = True
        if self.servers:
            self._push()
        return {"status": "Server started successfully"}

    def stop(self, _):
        with self.lock:
            self.started = False
            jobs = list(self.jobs.values())
        for gid in jobs:
            self._cancel(gid)
        return {"status": "Server stopped", "cancelled_jobs": len(jobs)}

    def status(self, _):
        with self.lock:
            doc = {"status": "running" if self.started else "stopped",
                   "pending_jobs": len(self.jobs), "llm_servers": list(self.servers)}
        doc["lis"] = self.eps.status()
        return doc

    def add_llm_server(self, body):
        addr = body.get("address")
        if not isinstance(addr, str) or not addr:
            raise HTTPError(400, "address must be a non-empty string")
        with self.lock:
            self.servers.append(v1(addr))
            started = self.started
        if started:  # buffered until /start otherwise, as ProRL
            self._push()
        return {"status": "LLM server added", "address": v1(addr)}

    def clear_llm_server(self, _):
        with self.lock:
            self.servers = []
        self.eps.set_inference([])
        return {"status": "LLM servers cleared"}

    def cancel(self, body):
        job = body.get("job_id")
        with self.lock:
            gid = self.jobs.get(job)
        if gid is None:
            raise HTTPError(404, "no job %s" % job)
        self._cancel(gid)
        return {"status": "Cancel requested for job %s" % job}

    def _cancel(self, gid):
        try:
            self.eps.cancel_group(gid)
        except SandboxException:
            pass

    def process(self, body):
        inst, sp = body.get("instance"), body.get("sampling_params") or {}
        if not isinstance(inst, dict) or not isinstance(sp, dict):
            raise HTTPError(400, "instance and sampling_params must be objects")
        with self.lock:
            if not self.started or not self.servers:
                raise HTTPError(503, "Server not started or no LLM server")
            base = self.servers[0]
        sampling = {k: v for k, v in sp.items() if k not in DROPPED}
        if sp.get("token_level_generation"):
            sampling.update(return_token_ids=True, logprobs=True)
        inference = {"base_url": base, "model": sp.get("model") or self.model, "sampling": sampling}
        if sp.get("api_key"):
            inference["api_key"] = sp["api_key"]
        group = {"task": task_of(inst), "n": 1, "inference": inference}
        if sp.get("max_iterations"):
            group["max_steps"] = int(sp["max_iterations"])
        if self.timeout:
            group["deadline_s"] = self.timeout
        job = str(body.get("job_id") or uuid.uuid4())
        g = self.eps.submit(group)
        (eid,) = g["episode_ids"]
        with self.lock:
            self.jobs[job] = g["group_id"]
        try:
            res = self.eps.episode(eid, wait=POLL_S)
            while res.get("status") in PENDING:
                res = self.eps.episode(eid, wait=POLL_S)
        finally:
            with self.lock:
                self.jobs.pop(job, None)
        return dict(result_of(res, inst), job_id=job)


ROUTES = {("POST", "/start"): "start", ("POST", "/stop"): "stop",
          ("GET", "/status"): "status", ("POST", "/process"): "process",
          ("POST", "/cancel"): "cancel", ("POST", "/add_llm_server"): "add_llm_server",
          ("POST", "/clear_llm_server"): "clear_llm_server"}


class Handler(BaseHTTPRequestHandler):
    service: Service = None  # set on the subclass made by serve()
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _reply(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        for name, value in (("Content-Type", "application/json"),
                            ("Content-Length", str(len(data)))):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise HTTPError(400, "bad Content-Length")
        if n < 0 or n > MAX_BODY:
            self.close_connection = True
            raise HTTPError(413, "a body is at most %d bytes, not %d" % (MAX_BODY, n))
        if n == 0:
            return {}
        try:
            doc = json.loads(self.rfile.read(n))
        except ValueError as e:
            raise HTTPError(400, "the body is not JSON: %s" % e)
        if not isinstance(doc, dict):
            raise HTTPError(400, "the body must be a JSON object")
        return doc

    def _route(self, method):
        name = ROUTES.get((method, self.path.split("?")[0]))
        try:
            if name is None:
                raise HTTPError(404, "no %s %s" % (method, self.path))
            body = self._body() if method == "POST" else {}
            self._reply(200, getattr(self.service, name)(body))
        except HTTPError as e:
            self._reply(e.status, {"detail": str(e)})
        except SandboxException as e:
            status = e.status if isinstance(e.status, int) and e.status < 500 else 502
            self._reply(status, {"detail": str(e).splitlines()[0] if str(e) else "lis failed"})

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")


def serve(listen: str, episodes: Episodes, timeout: float = 0.0,
          model: str = "policy") -> ThreadingHTTPServer:
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError("--listen is HOST:PORT, not %r" % listen)
    handler = type("ProRLHandler", (Handler,), {"service": Service(episodes, timeout, model)})
    srv = ThreadingHTTPServer((host.strip("[]"), int(port)), handler)
    srv.daemon_threads = True
    return srv


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lis.prorl", description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True, help="HOST:PORT (port 0: any; printed)")
    ap.add_argument("--socket", help="lis serve's socket (default: LIS_SOCKET or the user's)")
    ap.add_argument("--timeout", type=float, default=0.0,
                    help="deadline_s of each job's episode (0: none)")
    ap.add_argument("--model", default="policy",
                    help="the model name the LLM servers serve (a job's sampling_params.model wins)")
    a = ap.parse_args(argv)
    try:
        srv = serve(a.listen, Episodes(a.socket), a.timeout, a.model)
    except (ValueError, OSError, SandboxException) as e:
        print("lis.prorl: %s" % e, file=sys.stderr)
        return 2
    print("%s:%d" % srv.server_address[:2], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
