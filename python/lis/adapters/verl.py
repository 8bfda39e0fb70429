"""A verl agent loop over lis's step mode (docs/rl.md, "Trainers: the adapters"):
registered as "lis_env", it holds ONE env for the whole trajectory (the stock
ToolAgentLoop creates, executes and releases a tool per call) and generates with
verl's own engine. Contract read from volcengine/verl@b178a3c
(verl/experimental/agent_loop/agent_loop.py; reference notes rl-trainers.md
§2.2, §5.6): AgentLoopBase(trainer_config, server_manager, tokenizer,
processor, **kw), `async run(sampling_params, **kwargs) -> AgentLoopOutput`
{prompt_ids, response_ids, response_mask (1 = the model's, 0 = the env's),
response_logprobs, num_turns, reward_score, extra_fields}, `@register(name)`,
`server_manager.generate(request_id, prompt_ids, sampling_params)`.

    # agent_loop config: name: lis_env, _target_: lis.adapters.verl.LisAgentLoop
    # a dataset row's kwargs: raw_prompt (messages), extra_info: {"lis_task": {...}}

Tokenization is the trainer's: prompt_ids is tokenizer.apply_chat_template(the
first observation, add_generation_prompt=True, tokenize=True); the model's text
is tokenizer.decode(ids, skip_special_tokens=True); each observation's ids are
apply_chat_template(observations, add_generation_prompt=True, tokenize=True).
"""
import asyncio
import inspect
import uuid
from typing import Any, Callable, Dict, Optional

from ._env import StepEnv, env_body

try:
    from verl.experimental.agent_loop.agent_loop import (AgentLoopBase, AgentLoopOutput,
                                                         register)
except ImportError:
    AgentLoopOutput = None

    class AgentLoopBase:
        """verl's AgentLoopBase's constructor, where verl is not installed."""

        def __init__(self, trainer_config=None, server_manager=None, tokenizer=None,
                     processor=None, **kwargs):
            self.config = trainer_config
            self.server_manager = server_manager
            self.tokenizer = tokenizer
            self.processor = processor

    REGISTRY: Dict[str, type] = {}

    def register(name):
        def deco(cls):
            REGISTRY[name] = cls
            return cls
        return deco

DEFAULT_MAX_TURNS = 40


def _ids_and_logprobs(out):
    """(token ids, logprobs or None) of what a generate returned: a list of ids,
    an object with token_ids (and log_probs), or a dict with those keys."""
    if isinstance(out, dict):
        return list(out["token_ids"]), out.get("log_probs")
    if hasattr(out, "token_ids"):
        return list(out.token_ids), getattr(out, "log_probs", None)
    return list(out), None


def _tokens(tokenizer, messages):
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if isinstance(ids, dict) else ids)


@register("lis_env")
class LisAgentLoop(AgentLoopBase):
    """kwargs of run(): raw_prompt (messages: the task's when it has no prompt),
    extra_info {"lis_task": a lis task, "max_turns": n}, or lis_task directly;
    episodes: a lis.Episodes (else one on the default socket)."""

    def __init__(self, trainer_config=None, server_manager=None, tokenizer=None,
                 processor=None, episodes=None, max_turns: int = DEFAULT_MAX_TURNS,
                 response_length: Optional[int] = None, **kwargs):
        super().__init__(trainer_config, server_manager, tokenizer, processor, **kwargs)
        self.server_manager, self.tokenizer = server_manager, tokenizer
        self.episodes = episodes
        self.max_turns = max_turns
        self.response_length = response_length

    async def run(self, sampling_params: Dict[str, Any], generate: Optional[Callable] = None,
                  **kwargs):
        generate = generate or self.server_manager.generate
        extra = kwargs.get("extra_info") or {}
        task = dict(kwargs.get("lis_task") or extra.get("lis_task") or {})
        if "prompt" not in task and "messages" not in task:
            task["messages"] = [{"role": m["role"], "content": m["content"]}
                                for m in kwargs["raw_prompt"]]
        max_turns = int(extra.get("max_turns") or self.max_turns)
        env = StepEnv(env_body(task, max_steps=max_turns), self.episodes)
        request_id = kwargs.get("request_id") or uuid.uuid4().hex
        try:
            obs = await asyncio.to_thread(env.open)
            prompt_ids = _tokens(self.tokenizer, obs)
            response_ids, mask, logprobs = [], [], []
            turns = 0
            while turns < max_turns:
                out = generate(request_id=request_id, prompt_ids=prompt_ids + response_ids,
                               sampling_params=sampling_params)
                if inspect.isawaitable(out):
                    out = await out
                ids, lps = _ids_and_logprobs(out)
                response_ids += ids
                mask += [1] * len(ids)
                logprobs += list(lps) if lps is not None and len(lps) == len(ids) \
                    else [0.0] * len(ids)
                turns += 1
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                obs, done, _ = await asyncio.to_thread(env.step, text)
                if done or self._full(response_ids):
                    break
                obs_ids = _tokens(self.tokenizer, obs)
                response_ids += obs_ids
                mask += [0] * len(obs_ids)
                logprobs += [0.0] * len(obs_ids)
                if self._full(response_ids):
                    break
            reward = await asyncio.to_thread(env.final_reward)
            env_id = env.env_id
        finally:
            await asyncio.to_thread(env.close)
        n = len(response_ids) if self.response_length is None else self.response_length
        doc = {"prompt_ids": prompt_ids, "response_ids": response_ids[:n],
               "response_mask": mask[:n], "response_logprobs": logprobs[:n],
               "num_turns": turns, "reward_score": reward, "metrics": {},
               "extra_fields": {"lis_env_id": env_id, "lis_done": env.done}}
        return AgentLoopOutput(**doc) if AgentLoopOutput is not None else doc

    def _full(self, ids):
        return self.response_length is not None and len(ids) >= self.response_length
