"""rLLM's environment contract over lis's step mode (docs/rl.md, "Trainers: the
adapters"). Contract read from rLLM's BaseEnv as llm-in-sandbox-rl@1ed5a4e uses
it (rllm/environments/base/base_env.py; reference notes rl-trainers.md §2.2, §7):
reset() -> (observation, info), step(action) -> (observation, reward, done,
info), close(), compute_final_reward(), from_dict(extra_info),
is_multithread_safe().

    from lis.adapters.rllm import LisEnv
    env = LisEnv.from_dict(extra_info)     # {id, domain, problem_statement, ...}
    obs, info = env.reset()                # obs: the messages the model sees first
    obs, reward, done, info = env.step(model_turn)   # text or an assistant message
    reward = env.compute_final_reward()    # the task's scorer (lis serve's)
    env.close()

The observations are lis's (agent/'s tools, byte for byte what `lis run` gives):
a list of messages (the tool replies), not one string.
"""
from typing import Any, Dict, Optional

from ._env import StepEnv, env_body

try:  # rLLM's base class where rLLM is installed
    from rllm.environments.base.base_env import BaseEnv
except ImportError:
    class BaseEnv:
        """rLLM's BaseEnv's methods, where rLLM is not installed."""

        def reset(self):
            raise NotImplementedError

        def step(self, action):
            raise NotImplementedError

        def close(self):
            pass

        @staticmethod
        def from_dict(info):
            raise NotImplementedError

        @staticmethod
        def is_multithread_safe():
            return False

# The scorer of a row by its qa_type (lis serve's builtins); others: match.
SCORERS = {"math": "builtin:math", "multiple_choice": "builtin:letter",
           "mcq": "builtin:letter", "choice": "builtin:letter"}


def task_of_row(row: Dict[str, Any], image: Optional[str] = None,
                scorer: Optional[str] = None) -> Dict[str, Any]:
    """A lis task of the original RL environment's row (id, domain,
    problem_statement, ground_truth, input_files, qa_type; docker_image)."""
    if not isinstance(row.get("problem_statement"), str) or not row["problem_statement"]:
        raise ValueError("a row needs a problem_statement (text)")
    task = {"id": str(row.get("id", "")), "prompt": row["problem_statement"]}
    files = row.get("input_files")
    if files:
        if not isinstance(files, dict):
            raise ValueError("input_files must map a name to its text")
        task["files"] = dict(files)
    img = image or row.get("docker_image")
    if img:
        task["image"] = img
    if "ground_truth" in row:
        name = scorer or SCORERS.get(str(row.get("qa_type") or "").lower(), "builtin:match")
        task["reward"] = {"scorer": name, "ground_truth": row["ground_truth"]}
    return task


class LisEnv(BaseEnv):
    """One trajectory's env on lis serve. task: a lis task (docs/rl.md); row: the
    trainer's extra_info, kept in info; episodes: a lis.Episodes (else one on
    socket); max_steps, tool_timeout_s, idle_timeout_s: the env body's keys."""

    def __init__(self, task: Dict[str, Any], row: Optional[Dict[str, Any]] = None,
                 episodes=None, socket: Optional[str] = None, max_steps: Optional[int] = None,
                 tool_timeout_s: Optional[float] = None,
                 idle_timeout_s: Optional[float] = None):
        self.row = row if row is not None else {}
        self._env = StepEnv(env_body(task, max_steps=max_steps, tool_timeout_s=tool_timeout_s,
                                     idle_timeout_s=idle_timeout_s), episodes, socket)

    @property
    def env_id(self) -> Optional[str]:
        return self._env.env_id

    def reset(self):
        obs = self._env.open()
        return obs, {"extra_info": self.row, "env_id": self._env.env_id,
                     "group_id": self._env.group_id}

    def step(self, action: Any):
        # an rLLM Action wraps the model's turn in .action
        if hasattr(action, "action") and not isinstance(action, (str, dict)):
            action = action.action
        obs, done, info = self._env.step(action)
        return obs, 0.0, done, info

    def compute_final_reward(self) -> float:
        return self._env.final_reward()

    def close(self) -> None:
        self._env.close()

    @staticmethod
    def from_dict(extra_info: Dict[str, Any]) -> "LisEnv":
        """From the original RL environment's row; lis keys beside it:
        image (or docker_image), scorer, socket, max_steps, tool_timeout_s,
        idle_timeout_s."""
        row = dict(extra_info)
        opts = {k: row.pop(k) for k in ("socket", "max_steps", "tool_timeout_s",
                                       "idle_timeout_s") if k in row}
        task = task_of_row(row, image=row.pop("image", None), scorer=row.pop("scorer", None))
        return LisEnv(task, row=row, **opts)

    @staticmethod
    def is_multithread_safe() -> bool:
        return True  # each env is its own HTTP requests; the server serialises
