"""A verifiers Environment whose rollout is one lis episode (docs/rl.md,
"Trainers: the adapters"): the environment calls the model, as verifiers'
Environment.rollout does, through the trainer's own OpenAI-compatible endpoint.
Contract read from the verifiers v0.1.8 line (verifiers@9130142; reference notes
rl-trainers.md §2.2, §5.5): `async rollout(client, model, prompt, answer, task,
info, sampling_args) -> state`, state["trajectory"]: TrajectoryStep {prompt,
completion, response, tokens {prompt_ids, prompt_mask, completion_ids,
completion_mask, completion_logprobs, overlong_prompt, is_truncated}, reward,
advantage, is_truncated, trajectory_id, extras}, state["reward"].

    env = LisEnvironment(task={"image": "debian:12", "files": {...}}, scorer="builtin:math")
    state = await env.rollout(client, "policy", prompt, answer="42",
                              sampling_args={"logprobs": True, "return_token_ids": True})

The episode's inference is base_url = str(client.base_url), api_key =
client.api_key, sampling = sampling_args unchanged; its tokens are each turn's
(turns[t].tokens, as the endpoint sent them).
"""
from typing import Any, Dict, List, Optional

from ..aio import AsyncEpisodes

# Seconds one results long-poll waits (polled again until the episode ends).
POLL_S = 60.0


def _trajectory(res: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A TrajectoryStep-shaped dict per turn of an episode's result."""
    msgs = res.get("messages") or []
    at = [i for i, m in enumerate(msgs) if m.get("role") == "assistant"]
    truncated = res.get("status") in ("truncated", "timeout")
    steps = []
    for k, turn in enumerate(res.get("turns") or []):
        cut = at[k] if k < len(at) else len(msgs)
        tok = turn.get("tokens") or {}
        tokens = None
        if tok.get("ids") is not None:
            pids, ids = list(tok.get("prompt_ids") or []), list(tok["ids"])
            lps = tok.get("logprobs")
            tokens = {"prompt_ids": pids, "prompt_mask": [0] * len(pids),
                      "completion_ids": ids, "completion_mask": [1] * len(ids),
                      "completion_logprobs": list(lps) if lps and len(lps) == len(ids)
                      else [0.0] * len(ids),
                      "overlong_prompt": False, "is_truncated": False}
        steps.append({"prompt": msgs[:cut], "completion": [turn.get("message")],
                      "response": None, "tokens": tokens, "reward": None, "advantage": None,
                      "is_truncated": truncated and k == len(res["turns"]) - 1,
                      "trajectory_id": res.get("episode_id"),
                      "extras": {"step": turn.get("step"), "observation": turn.get("observation"),
                                 "effects": turn.get("effects"),
                                 "capability": turn.get("capability"),
                                 "weight_version": turn.get("weight_version")}})
    if steps:
        steps[-1]["reward"] = res.get("reward")
    return steps


class LisEnvironment:
    """task: the lis task every rollout starts from (image, files, setup...):
    the rollout's prompt is its prompt (text) or messages; scorer: the task's
    reward scorer (the answer is its ground truth); episodes: a lis.AsyncEpisodes;
    body: more of the group's keys (max_steps, deadline_s, tool_timeout_s...)."""

    def __init__(self, task: Optional[Dict[str, Any]] = None, scorer: Optional[str] = None,
                 episodes: Optional[AsyncEpisodes] = None, **body):
        self.task = dict(task or {})
        self.scorer = scorer
        self.episodes = episodes if episodes is not None else AsyncEpisodes()
        self.body = body

    def episode_body(self, client, model, prompt, answer="", sampling_args=None):
        task = dict(self.task)
        if isinstance(prompt, str):
            task["prompt"] = prompt
        else:
            task["messages"] = [{"role": m["role"], "content": m["content"]} for m in prompt]
        if self.scorer:
            task["reward"] = {"scorer": self.scorer, "ground_truth": answer}
        inference = {"base_url": str(client.base_url).rstrip("/"), "model": model,
                     "sampling": dict(sampling_args or {})}
        key = getattr(client, "api_key", None)
        if key:
            inference["api_key"] = key
        doc = dict(self.body)
        doc.update(task=task, n=1, inference=inference)
        return doc

    async def rollout(self, client, model: str, prompt, answer: str = "", task: str = "default",
                      info: Optional[Dict[str, Any]] = None,
                      sampling_args: Optional[Dict[str, Any]] = None, **kwargs) -> Dict[str, Any]:
        g = await self.episodes.submit(self.episode_body(client, model, prompt, answer,
                                                         sampling_args))
        (eid,) = g["episode_ids"]
        while True:
            res = await self.episodes.episode(eid, wait=POLL_S)
            if res.get("status") not in ("queued", "setup", "running", "scoring"):
                break
        msgs = res.get("messages") or []
        first = next((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), len(msgs))
        return {"prompt": msgs[:first], "completion": msgs[first:], "answer": answer,
                "task": task, "info": info or {}, "trajectory": _trajectory(res),
                "reward": res.get("reward"), "is_truncated": res.get("status") in
                ("truncated", "timeout"), "lis_result": res}
