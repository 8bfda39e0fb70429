"""One step-mode env (docs/rl.md, "Step mode") as the step-mode adapters use it:
made on reset, stepped, scored, ended. Not thread-safe by itself: one object per
trajectory, as the trainers hold them."""
from typing import Any, Dict, List, Optional, Tuple

from ..episodes import Episodes
from ..errors import ConflictException, NotFoundException

# Seconds POST envs waits for the env's first observation (its set-up).
CREATE_WAIT = 600.0
# Seconds the result of an ended env is waited for (its reward is scored then).
RESULT_WAIT = 120.0


def env_body(task: Dict[str, Any], **keys) -> Dict[str, Any]:
    """A POST envs body for one env of task; keys with a None value are left out
    (the server's defaults)."""
    body = {"task": task, "n": 1}
    body.update({k: v for k, v in keys.items() if v is not None})
    return body


class StepEnv:
    """One env of lis serve: open() makes it (ending the previous one), step()
    takes an action, final_reward() scores it, close() ends it."""

    def __init__(self, body: Dict[str, Any], episodes: Optional[Episodes] = None,
                 socket: Optional[str] = None):
        self.body = body
        self.eps = episodes if episodes is not None else Episodes(socket)
        self.env_id: Optional[str] = None
        self.group_id: Optional[str] = None
        self.done = False
        self.steps = 0

    def open(self) -> List[Dict[str, Any]]:
        """Makes the env; its first observation (the messages the model sees first)."""
        self.close()
        doc = self.eps.create_envs(dict(self.body), wait=CREATE_WAIT)
        (self.env_id,) = doc["env_ids"]
        self.group_id = doc.get("group_id")
        self.done, self.steps = False, 0
        return doc["observation"]

    def step(self, action: Any) -> Tuple[List[Dict[str, Any]], bool, Dict[str, Any]]:
        """(observations, done, info) of one action: an assistant message
        (OpenAI's shape, tool_calls) or raw text with hermes or qwen3-coder calls."""
        if self.env_id is None:
            raise RuntimeError("step() before reset(): no env")
        doc = self.eps.step(self.env_id, action)
        self.done = bool(doc.get("done"))
        self.steps += 1
        return doc.get("observations") or [], self.done, doc.get("info") or {}

    def final_reward(self) -> float:
        """The task's scorer on the answer file: now (POST reward) while the env
        waits, else the reward of its result once it ended (0.0 without one)."""
        if self.env_id is None:
            raise RuntimeError("no env to score")
        if not self.body["task"].get("reward"):
            return 0.0  # a task without a scorer
        if not self.done:
            try:
                return float(self.eps.reward(self.env_id).get("reward") or 0.0)
            except ConflictException:
                pass  # ended meanwhile (its idle timeout): its result has it
        return float(self.result().get("reward") or 0.0)

    def result(self) -> Dict[str, Any]:
        """The env's result as an episode's (docs/rl.md), once it ended."""
        return self.eps.episode(self.env_id, wait=RESULT_WAIT)

    def close(self) -> None:
        """Ends the env (DELETE): nothing when none or already ended."""
        if self.env_id is None:
            return
        eid, self.env_id = self.env_id, None
        if self.done:
            return
        try:
            self.eps.delete_env(eid)
        except (NotFoundException, ConflictException):
            pass
