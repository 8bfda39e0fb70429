"""SkyRL's text environment over lis's step mode (docs/rl.md, "Trainers: the
adapters"). Contract read from NovaSky-AI/SkyRL@297e467 (skyrl-gym's
BaseTextEnv, reference notes rl-trainers.md §2.2): __init__(env_config,
extras), init(prompt) -> (prompt, metadata), step(action: str) ->
BaseTextEnvStepOutput {"observations", "reward", "done", "metadata"}, close().

    env = LisTextEnv(env_config, extras={"task": {...lis task...}})
    prompt, meta = env.init(chat)          # the messages the model sees first
    out = env.step(model_text)             # observations: lis's tool replies
    env.close()

extras["task"] is the lis task (docs/rl.md); without a prompt or messages in it,
the trainer's prompt (a list of messages) is the task's messages. The reward is
0.0 until the episode ends, then the task's scorer's (lis serve's).
"""
from typing import Any, Dict, Optional

from ._env import StepEnv, env_body

try:
    from skyrl_gym.envs.base_text_env import BaseTextEnv
except ImportError:
    class BaseTextEnv:
        """SkyRL's BaseTextEnv's methods, where SkyRL is not installed."""

        def __init__(self, *a, **kw):
            self.turns = 0
            self.max_turns = 1

        def init(self, prompt):
            return prompt, {}

        def step(self, action):
            raise NotImplementedError

        def close(self):
            pass

ENV_OPTIONS = ("max_steps", "tool_timeout_s", "idle_timeout_s")


class LisTextEnv(BaseTextEnv):
    """env_config: a dict (or object) with socket and the env body's options
    (max_steps, tool_timeout_s, idle_timeout_s); extras: {"task": lis task}."""

    def __init__(self, env_config: Any = None, extras: Optional[Dict[str, Any]] = None,
                 episodes=None):
        super().__init__()
        if hasattr(env_config, "get"):  # a dict, or SkyRL's DictConfig
            get = env_config.get
        else:
            def get(k):
                return getattr(env_config, k, None)
        self.extras = dict(extras or {})
        self._opts = {k: get(k) for k in ENV_OPTIONS}
        self._episodes, self._socket = episodes, get("socket")
        self._env: Optional[StepEnv] = None

    def init(self, prompt):
        task = dict(self.extras.get("task") or {})
        if "prompt" not in task and "messages" not in task:
            if isinstance(prompt, str):
                task["prompt"] = prompt
            else:
                task["messages"] = [{"role": m["role"], "content": m["content"]} for m in prompt]
        self._env = StepEnv(env_body(task, **self._opts), self._episodes, self._socket)
        obs = self._env.open()
        return obs, {"env_id": self._env.env_id, "group_id": self._env.group_id}

    def step(self, action: str) -> Dict[str, Any]:
        if self._env is None:
            raise RuntimeError("step() before init()")
        obs, done, info = self._env.step(action)
        self.turns = self._env.steps
        reward = self._env.final_reward() if done else 0.0
        return {"observations": obs, "reward": reward, "done": done,
                "metadata": dict(info, env_id=self._env.env_id)}

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
