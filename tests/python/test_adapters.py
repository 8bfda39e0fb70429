"""The trainers' adapters (python/lis/adapters, python/lis/prorl.py; docs/rl.md
"Trainers: the adapters", issue 31 item 2), each driven through a minimal
stand-in of its trainer's base class, written from the contract in the
project's reference notes (rl-trainers.md §1.1, §2.2, §5.5, §5.6, §7; the
trainer and commit are named at each stand-in), for a whole episode against a
real lis serve (the session's server) and, where the environment calls the
model, tests/fake_llm.py in token mode."""
import abc
import asyncio
import dataclasses
import http.client
import importlib
import json
import os
import socket
import subprocess
import sys
import types
from typing import Any, Dict, List, Optional

from conftest import IMAGE
from test_rl_e2e import SUBMIT, TOKENS, api, bash, fake_factory  # noqa: F401

LIS_PY = os.path.dirname(os.path.dirname(importlib.import_module("lis").__file__))
REWARD = {"scorer": "builtin:match", "ground_truth": "42"}


def standin(monkeypatch, modname, **attrs):
    """A trainer's module (and its parents) in sys.modules, holding attrs."""
    parts = modname.split(".")
    for i in range(1, len(parts) + 1):
        monkeypatch.setitem(sys.modules, ".".join(parts[:i]),
                            types.ModuleType(".".join(parts[:i])))
    for k, v in attrs.items():
        setattr(sys.modules[modname], k, v)


def fresh(monkeypatch, name):
    """The adapter module imported anew (over the stand-in just installed)."""
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name)


def hermes(cmd):
    return ('<tool_call>\n{"name": "execute_bash", "arguments": %s}\n</tool_call>'
            % json.dumps({"command": cmd}))


HERMES_SUBMIT = '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>'


def result(server, eid):
    st, res = api(server, "GET", "episodes/%s?wait=120" % eid)
    assert st == 200, res
    return res


# ---- rLLM ------------------------------------------------------------------
class RllmBaseEnv(abc.ABC):
    """rLLM's BaseEnv (rllm/environments/base/base_env.py as llm-in-sandbox-rl@1ed5a4e
    uses it): reset -> (obs, info), step -> (obs, reward, done, info), close,
    from_dict, is_multithread_safe."""

    @abc.abstractmethod
    def reset(self):
        ...

    @abc.abstractmethod
    def step(self, action):
        ...

    def close(self):
        pass

    @staticmethod
    @abc.abstractmethod
    def from_dict(info):
        ...

    @staticmethod
    def is_multithread_safe():
        return False


def test_rllm_lis_env_full_episode(server, monkeypatch):
    standin(monkeypatch, "rllm.environments.base.base_env", BaseEnv=RllmBaseEnv)
    mod = fresh(monkeypatch, "lis.adapters.rllm")
    # the original RL environment's row (extra_info), its image a lis tag
    row = {"id": "r1", "domain": "math", "qa_type": "exact", "ground_truth": "42",
           "problem_statement": "What is 6*7? Write it to /testbed/answer.txt.",
           "input_files": {"a.txt": "six seven\n"}, "docker_image": IMAGE}
    env = mod.LisEnv.from_dict(row)
    assert isinstance(env, RllmBaseEnv) and env.is_multithread_safe() is True
    obs, info = env.reset()
    assert info["extra_info"]["id"] == "r1" and info["env_id"]
    assert [m["role"] for m in obs] == ["system", "user"], obs
    assert "What is 6*7?" in obs[1]["content"]
    obs, reward, done, info = env.step(hermes("cat /testbed/input/a.txt"))
    assert (reward, done, info["step"]) == (0.0, False, 0), info
    assert "six seven" in obs[0]["content"], obs
    # an assistant message with tool_calls (OpenAI's shape), wrapped as rLLM's Action
    act = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {
            "name": "execute_bash", "arguments": json.dumps({"command": "echo 42 > /testbed/answer.txt"})}}]}
    obs, reward, done, _ = env.step(types.SimpleNamespace(action=act))
    assert done is False
    assert env.compute_final_reward() == 1.0  # scored on the live sandbox
    eid = env.env_id
    obs, reward, done, info = env.step(HERMES_SUBMIT)
    assert done is True and info["stop_reason"] == "submit", info
    assert env.compute_final_reward() == 1.0  # the ended env's result
    env.close()
    res = result(server, eid)
    assert res["status"] == "completed" and len(res["turns"]) == 3, res
    # a second env closed while it waits ends cancelled
    env2 = mod.LisEnv.from_dict(row)
    env2.reset()
    eid2 = env2.env_id
    env2.close()
    assert result(server, eid2)["status"] == "cancelled"


# ---- SkyRL -----------------------------------------------------------------
class SkyrlBaseTextEnv:
    """SkyRL's BaseTextEnv (skyrl-gym, NovaSky-AI/SkyRL@297e467): init(prompt) ->
    (prompt, metadata), step(action: str) -> BaseTextEnvStepOutput, close()."""

    def __init__(self):
        self.turns = 0
        self.max_turns = 1

    def init(self, prompt):
        return prompt, {}

    def step(self, action: str):
        raise NotImplementedError

    def close(self):
        pass


STEP_OUTPUT = {"observations", "reward", "done", "metadata"}  # BaseTextEnvStepOutput


def test_skyrl_text_env_full_episode(server, monkeypatch):
    standin(monkeypatch, "skyrl_gym.envs.base_text_env", BaseTextEnv=SkyrlBaseTextEnv)
    mod = fresh(monkeypatch, "lis.adapters.skyrl")
    env = mod.LisTextEnv({"max_steps": 10}, extras={"task": {"image": IMAGE, "reward": REWARD}})
    assert isinstance(env, SkyrlBaseTextEnv)
    # SkyRLGymGenerator's loop: init, then step(the model's text) until done
    chat, meta = env.init([{"role": "user", "content": "Write 42 to /testbed/answer.txt."}])
    assert chat[-1]["role"] == "user" and "Write 42" in chat[-1]["content"], chat
    outs = []
    for text in (hermes("echo 42 > /testbed/answer.txt"), hermes("cat /testbed/answer.txt"),
                 HERMES_SUBMIT):
        out = env.step(text)
        assert set(out) == STEP_OUTPUT, out
        outs.append(out)
        if out["done"]:
            break
    env.close()
    assert [o["done"] for o in outs] == [False, False, True]
    assert [o["reward"] for o in outs] == [0.0, 0.0, 1.0]
    assert "42" in outs[1]["observations"][0]["content"], outs[1]
    assert env.turns == 3
    res = result(server, meta["env_id"])
    assert res["status"] == "completed" and res["reward"] == 1.0, res


# ---- verl ------------------------------------------------------------------
VERL_REGISTRY: Dict[str, type] = {}


def verl_register(name):
    """verl's @register(name) (verl/experimental/agent_loop/agent_loop.py, volcengine/verl@b178a3c)."""
    return lambda cls: VERL_REGISTRY.setdefault(name, cls)


class VerlAgentLoopBase:
    """verl's AgentLoopBase (volcengine/verl@b178a3c): built with the trainer's
    config, server manager, tokenizer and processor; `async run(sampling_params,
    **kwargs) -> AgentLoopOutput`."""

    def __init__(self, trainer_config, server_manager, tokenizer, processor, **kwargs):
        self.config = trainer_config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor

    async def run(self, sampling_params, **kwargs):
        raise NotImplementedError


@dataclasses.dataclass
class VerlAgentLoopOutput:
    """verl's AgentLoopOutput's fields (volcengine/verl@b178a3c)."""
    prompt_ids: List[int]
    response_ids: List[int]
    response_mask: List[int]
    num_turns: int
    response_logprobs: Optional[List[float]] = None
    reward_score: Optional[float] = None
    metrics: Any = None
    extra_fields: Dict[str, Any] = dataclasses.field(default_factory=dict)


class ToyTokenizer:
    """One id per UTF-8 byte (1000 + the byte), over a toy chat template."""

    def encode(self, text):
        return [1000 + b for b in text.encode()]

    def decode(self, ids, skip_special_tokens=True):
        return bytes(i - 1000 for i in ids).decode()

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True):
        text = "".join("<|%s|>%s<|end|>" % (m["role"], m.get("content") or "") for m in messages)
        text += "<|assistant|>" if add_generation_prompt else ""
        return self.encode(text) if tokenize else text


class ServerManager:
    """verl's AsyncLLMServerManager.generate(request_id, prompt_ids, sampling_params), scripted."""

    def __init__(self, tok, texts):
        self.tok, self.texts, self.calls = tok, list(texts), []

    async def generate(self, request_id, prompt_ids, sampling_params):
        self.calls.append((request_id, list(prompt_ids), sampling_params))
        ids = self.tok.encode(self.texts[len(self.calls) - 1])
        return types.SimpleNamespace(token_ids=ids, log_probs=[-0.5] * len(ids))


def test_verl_agent_loop_holds_one_env(server, monkeypatch):
    VERL_REGISTRY.clear()
    standin(monkeypatch, "verl.experimental.agent_loop.agent_loop", AgentLoopBase=VerlAgentLoopBase,
            AgentLoopOutput=VerlAgentLoopOutput, register=verl_register)
    fresh(monkeypatch, "lis.adapters.verl")
    cls = VERL_REGISTRY["lis_env"]
    assert issubclass(cls, VerlAgentLoopBase)
    tok = ToyTokenizer()
    texts = [hermes("echo 42 > /testbed/answer.txt"), hermes("cat /testbed/answer.txt"),
             HERMES_SUBMIT]
    sm = ServerManager(tok, texts)
    loop = cls(trainer_config={}, server_manager=sm, tokenizer=tok, processor=None)
    out = asyncio.run(loop.run(
        {"temperature": 1.0}, request_id="r0",
        raw_prompt=[{"role": "user", "content": "Write 42 to /testbed/answer.txt."}],
        extra_info={"lis_task": {"image": IMAGE, "reward": REWARD}}))
    assert isinstance(out, VerlAgentLoopOutput)
    assert out.num_turns == 3 and out.reward_score == 1.0, out
    n = len(out.response_ids)
    assert len(out.response_mask) == n and len(out.response_logprobs) == n
    # each turn's prompt is the first prompt plus everything so far (one sequence)
    for k, (rid, pids, sp) in enumerate(sm.calls):
        assert rid == "r0" and sp == {"temperature": 1.0}
        assert pids[:len(out.prompt_ids)] == out.prompt_ids
    assert sm.calls[2][1] == out.prompt_ids + out.response_ids[:len(sm.calls[2][1]) - len(out.prompt_ids)]
    # the model's tokens are masked 1, the env's 0, and the env's hold its replies
    model = tok.decode([i for i, m in zip(out.response_ids, out.response_mask) if m == 1])
    envs = tok.decode([i for i, m in zip(out.response_ids, out.response_mask) if m == 0])
    assert model == "".join(texts)
    assert "42" in envs and envs.endswith("<|assistant|>"), envs
    # one env for the whole trajectory: its three turns in one episode
    res = result(server, out.extra_fields["lis_env_id"])
    assert res["status"] == "completed" and len(res["turns"]) == 3, res


# ---- verifiers ---------------------------------------------------------------
# verifiers' TrajectoryStep and TrajectoryStepTokens keys (the v0.1.8 line, verifiers@9130142)
TRAJECTORY_STEP = {"prompt", "completion", "response", "tokens", "reward", "advantage",
                   "is_truncated", "trajectory_id", "extras"}
STEP_TOKENS = {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask",
               "completion_logprobs", "overlong_prompt", "is_truncated"}


class OpenAIClient:
    """What Environment.rollout reads of the orchestrator's AsyncOpenAI client."""

    def __init__(self, base_url, api_key):
        self.base_url, self.api_key = base_url, api_key


def test_verifiers_rollout_is_one_episode(server, fake_factory):
    from lis.adapters.verifiers import LisEnvironment
    fake = fake_factory({"mode": "openai", "rows": {"default": [
        bash("echo 42 > /testbed/answer.txt"), SUBMIT]}})
    env = LisEnvironment(task={"image": IMAGE}, scorer="builtin:match", max_steps=10)
    prompt = [{"role": "user", "content": "Write 42 to /testbed/answer.txt."}]
    state = asyncio.run(env.rollout(OpenAIClient(fake.url, "sk-1"), "policy", prompt,
                                    answer="42", sampling_args=dict(TOKENS)))
    assert state["reward"] == 1.0, state
    traj = state["trajectory"]
    assert len(traj) == 2 and all(set(s) == TRAJECTORY_STEP for s in traj), traj
    reqs = fake.requests()
    assert len(reqs) == 2
    for s, r in zip(traj, reqs):
        body = r["body"]
        assert {k: body.get(k) for k in TOKENS} == TOKENS and r["auth"] == "Bearer sk-1"
        assert set(s["tokens"]) == STEP_TOKENS
        t = s["tokens"]
        assert t["prompt_mask"] == [0] * len(t["prompt_ids"]) and t["prompt_ids"]
        assert t["completion_mask"] == [1] * len(t["completion_ids"]) and t["completion_ids"]
        assert len(t["completion_logprobs"]) == len(t["completion_ids"])
        assert s["prompt"][-1]["role"] in ("user", "tool") and s["completion"][0]["role"] == "assistant"
    assert traj[1]["prompt"][:len(traj[0]["prompt"])] == traj[0]["prompt"]
    assert traj[-1]["reward"] == 1.0 and traj[0]["trajectory_id"] == state["lis_result"]["episode_id"]


# ---- NVIDIA ProRL Agent Server -------------------------------------------------
def prorl(port, method, path, body=None, raw_headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = c.getresponse()
    doc = json.loads(r.read() or b"null")
    c.close()
    return r.status, doc


def test_prorl_server_process(server, fake_factory):
    fake = fake_factory({"mode": "openai", "rows": {"default": [
        bash("echo 42 > /testbed/answer.txt"), SUBMIT]}})
    env = dict(os.environ, LIS_SOCKET=server.sock,
               PYTHONPATH=LIS_PY + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "lis.prorl", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, env=env, text=True)
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        job = {"instance": {"data_source": "lis", "instance_id": "i1", "trajectory_id": "t0",
                            "problem_statement": "Write 42 to /testbed/answer.txt.",
                            "ground_truth": "42", "image": IMAGE},
               "sampling_params": {"model": "policy", "temperature": 1.0, "max_iterations": 10,
                                   "native_tool_calling": True, "token_level_generation": True},
               "job_id": "j1"}
        st, doc = prorl(port, "POST", "/process", job)
        assert st == 503, doc  # not started
        st, doc = prorl(port, "POST", "/add_llm_server", {"address": fake.url})
        assert st == 200, doc
        assert prorl(port, "POST", "/start")[0] == 200
        st, doc = prorl(port, "POST", "/start")
        assert st == 400, doc
        st, doc = prorl(port, "GET", "/status")
        assert st == 200 and doc["status"] == "running" and doc["pending_jobs"] == 0, doc
        st, res = prorl(port, "POST", "/process", job)
        assert st == 200, res
        assert (res["instance_id"], res["trajectory_id"], res["job_id"]) == ("i1", "t0", "j1")
        assert res["resolved"] is True and res["critical_error"] is None and res["filter"] is False
        assert set(res["timing"]) == {"init", "run", "eval"}, res
        asst = [m for m in res["messages"] if m["role"] == "assistant"]
        assert len(asst) == 2
        for m in asst:
            assert m["token_ids"] and m["input_ids"] and len(m["logprobs"]) == len(m["token_ids"])
        body = fake.requests()[0]["body"]
        assert body["return_token_ids"] is True and body["temperature"] == 1.0
        assert "native_tool_calling" not in body and "max_iterations" not in body
        # bounded bodies, unknown jobs and paths: one line each
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /process HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 413"), "no 413"
        s.close()
        assert prorl(port, "POST", "/cancel", {"job_id": "nope"})[0] == 404
        assert prorl(port, "POST", "/nope", {})[0] == 404
        st, doc = prorl(port, "POST", "/clear_llm_server")
        assert st == 200 and prorl(port, "POST", "/process", job)[0] == 503
        st, doc = prorl(port, "POST", "/stop")
        assert st == 200 and prorl(port, "GET", "/status")[1]["status"] == "stopped"
    finally:
        proc.kill()
        proc.wait()
        api(server, "PUT", "rl/inference", {"endpoints": []})
