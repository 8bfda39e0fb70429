"""The LLM-in-Sandbox RL environment on lis: the constructor and methods of
llm-in-sandbox-rl's `LLMinSandboxEnv` (rllm/environments/llm_in_sandbox/
llm_in_sandbox_env.py, over rLLM's BaseEnv), backed by a lis sandbox
(lis.docker_runtime.DockerRuntime on lis serve) instead of a Docker container.
Training code written for it changes one import (docs/rl.md, "The one-import
switch"):

    # from rllm.environments.llm_in_sandbox.llm_in_sandbox_env import LLMinSandboxEnv
    from lis.rllm_env import LLMinSandboxEnv

    env = LLMinSandboxEnv.from_dict(extra_info)  # or LLMinSandboxEnv(entry, docker_image=...)
    obs, info = env.reset()                      # (problem_statement, {"extra_info": entry})
    obs, reward, done, info = env.step(action)   # reward 0.0, done on submit
    reward = env.compute_final_reward()
    env.close()

How step() makes its observation (env.tools says which):
- "llm_in_sandbox" (the default where the original package is installed, as it is
  wherever the original's training code runs: its agent imports it): the original
  package's own Agent._execute_action(action, runtime), as the original env calls
  it, over lis's DockerRuntime: the texts are the original's, byte for byte;
- "exec" (without the package): execute_bash runs the command through the
  sandbox's exec (DockerRuntime.demux_run), its text framed as the original's
  execute_bash observation ("Exit code: ...\\nExecution output of
  \\\\[execute_bash]:\\n\\\\[STDOUT]\\n..."), without lis's cut of long outputs;
  submit answers "<<< Finished >>>"; str_replace_editor, a missing or unknown
  call raise NotImplementedException: lis's own tools for one action are lis
  serve's step mode (POST /lis/v1/envs/{id}/step), which lis.adapters.rllm.LisEnv
  uses with this same contract.

compute_final_reward() reads the answer file as the original does (cat
{output_dir}/answer.txt), then scores it with reward_fn(answer, ground_truth,
**entry_without_ground_truth) when one is given, else with the original
package's instruct_pretrain reward router in a one-process pool with a 60 s
timeout, as the original does; without either, NotImplementedException (lis
serve scores a group's episodes, not a single sandbox yet: step mode's
POST /lis/v1/envs/{id}/reward).
"""
import importlib.util
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from typing import Any, Callable, Optional, Tuple

from .docker_runtime import DockerRuntime
from .errors import NotImplementedException

try:  # rLLM's base class where rLLM is installed (the engine checks nothing more)
    from rllm.environments.base.base_env import BaseEnv
except ImportError:
    BaseEnv = object

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "cdx123/llm-in-sandbox:v0.1"  # the original's default, as a store tag
DEFAULT_WORKDIR = "/testbed"
REWARD_TIMEOUT = 60  # seconds, as the original's future.result(timeout=60)

_XML_FUNCTION = re.compile(r"<function\s*=\s*([^>]+)>")
_XML_PARAM = re.compile(r"<parameter\s*=\s*([^>]+)>(.*?)</parameter>", re.DOTALL)


def _original_package():
    """(Action, Agent) of the llm_in_sandbox package, or None where it is not
    installed. Installed but broken (its litellm, rich or docker missing): the
    ImportError, not a quiet fall back to other observations."""
    if "llm_in_sandbox" not in sys.modules and importlib.util.find_spec("llm_in_sandbox") is None:
        return None
    from llm_in_sandbox import Action
    from llm_in_sandbox.agent import Agent
    return Action, Agent


def parse_action(action: Any) -> Tuple[str, Any]:
    """(function name, parameters) of an action as rLLM's engine hands it over:
    an object with function_name and parameters (llm_in_sandbox's or R2E-Gym's
    Action), an rLLM Action wrapping one (.action), a dict (function_name/
    parameters, or an OpenAI tool call {"function": {"name", "arguments"}}),
    or the XML text "<function=NAME><parameter=K>V</parameter></function>"."""
    if hasattr(action, "action") and not hasattr(action, "function_name"):
        action = action.action
    if isinstance(action, str):
        m = _XML_FUNCTION.search(action)
        if not m:
            return "", {}
        return m.group(1).strip(), {k.strip(): v.strip() for k, v in _XML_PARAM.findall(action)}
    if isinstance(action, dict):
        if isinstance(action.get("function"), dict):
            fn = action["function"]
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError:
                    args = None  # malformed: the continue message, as the original
            return fn.get("name") or "", args
        return action.get("function_name") or action.get("name") or "", \
            action.get("parameters", action.get("arguments", {}))
    if hasattr(action, "function_name"):
        return action.function_name or "", getattr(action, "parameters", {})
    if action is None:
        return "", {}
    raise TypeError("step(): an action is an Action (function_name, parameters), a dict or an "
                    "XML string, not %s" % type(action).__name__)


def _bash_observation(stdout: str, stderr: str, exit_code: str) -> str:
    """The original's execute_bash observation frame (the literal backslashes
    included); stderr only when it is not blank."""
    text = "Exit code: %s\nExecution output of \\[execute_bash]:\n\\[STDOUT]\n" % exit_code
    if stdout.strip():
        text += stdout
    if stderr.strip():
        text += "\n\\[STDERR]\n" + stderr
    return text


def _score_in_process(answer, ground_truth, kwargs):
    from llm_in_sandbox.benchmark.runner import load_reward_function
    return load_reward_function("instruct_pretrain")(answer, ground_truth, **kwargs)


class LLMinSandboxEnv(BaseEnv):
    """LLM-in-Sandbox's RL environment on a lis sandbox. Same constructor as the
    original's; lis's own keyword arguments: reward_fn (a callable(answer,
    ground_truth, **entry_kwargs) -> float), tools ("auto", "llm_in_sandbox" or
    "exec": see the module's docstring), and DockerRuntime's (lis_socket=,
    mem_limit=, lis_net=, environment=)."""

    def __init__(self, entry: dict, docker_image: str = DEFAULT_IMAGE, step_timeout: int = 120,
                 verbose: bool = False, working_dir: str = None, input_dir: str = None,
                 output_dir: str = None, *, reward_fn: Optional[Callable[..., float]] = None,
                 tools: str = "auto", **runtime_kwargs):
        self.entry = entry
        self.docker_image = docker_image
        self.step_timeout = step_timeout
        self.verbose = verbose
        self.working_dir = working_dir or entry.get("working_dir", DEFAULT_WORKDIR)
        self.input_dir = input_dir or entry.get("input_dir", "%s/documents" % self.working_dir)
        self.output_dir = output_dir or entry.get("output_dir", "%s/" % self.working_dir)
        self.reward_fn = reward_fn
        self.runtime_kwargs = runtime_kwargs
        self.runtime = None
        self.total_steps = 0
        self._temp_dir = None
        orig = _original_package() if tools in ("auto", "llm_in_sandbox") else None
        if tools == "llm_in_sandbox" and orig is None:
            raise ImportError("tools='llm_in_sandbox' needs the llm_in_sandbox package")
        if tools not in ("auto", "llm_in_sandbox", "exec"):
            raise ValueError("tools: 'auto', 'llm_in_sandbox' or 'exec', not %r" % (tools,))
        self.tools = "llm_in_sandbox" if orig else "exec"
        self._Action, agent_cls = orig if orig else (None, None)
        # the original executes actions with an Agent made without __init__
        self._agent_impl = agent_cls.__new__(agent_cls) if agent_cls else None

    def reset(self) -> Tuple[str, dict]:
        """A new sandbox (the previous one closed) with the entry's input_files
        in input_dir; returns (problem_statement, {"extra_info": entry})."""
        if self.runtime is not None:
            self.close()
        self.runtime = DockerRuntime(docker_image=self.docker_image, repo_path=self.working_dir,
                                     logger=logger if self.verbose else False,
                                     **self.runtime_kwargs)
        files = self.entry.get("input_files")
        if files:
            self._copy_input_files(files)
        self.total_steps = 0
        return self.entry.get("problem_statement", ""), {"extra_info": self.entry}

    def _copy_input_files(self, files):
        if isinstance(files, str):
            files = json.loads(files) if files else {}
        if not files:
            return
        self._temp_dir = tempfile.mkdtemp(prefix="lis-env-")
        for name, content in files.items():
            if content is None:
                continue
            path = os.path.join(self._temp_dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(content)
        self.runtime.copy_dir_to_container(self._temp_dir, self.input_dir)

    def step(self, action: Any) -> Tuple[str, float, bool, dict]:
        """Executes one action; returns (observation, 0.0, done, {}), done when
        the action is submit."""
        if self.runtime is None:
            raise RuntimeError("step() before reset(): no sandbox")
        self.total_steps += 1
        if self._agent_impl is not None:
            if isinstance(action, str):
                action = self._Action.from_string(action)
            elif not isinstance(action, self._Action):
                name, params = parse_action(action)
                action = self._Action(function_name=name, parameters=params)
            obs = self._agent_impl._execute_action(action, self.runtime)
            return obs, 0.0, action.function_name == "submit", {}
        name, params = parse_action(action)
        return self._exec_step(name, params), 0.0, name == "submit", {}

    def _exec_step(self, name, params):
        if name == "execute_bash" and isinstance(params, dict):
            command = params.get("command", "")
            if not command:
                return "Error: No command provided."
            out, err, code = self.runtime.demux_run(command, timeout=self.step_timeout)
            return _bash_observation(out, err, code)
        if name == "submit" and isinstance(params, dict):
            return "<<< Finished >>>"
        raise NotImplementedException(
            "step(%s) on lis without the llm_in_sandbox package: lis serve cannot run one "
            "action with lis's own tools yet (step mode, POST /lis/v1/envs/{id}/step, issue "
            "31); only execute_bash and submit are run here (install llm_in_sandbox for the "
            "original's tools over this sandbox)" % (name or "no tool call",))

    def compute_final_reward(self) -> float:
        """The answer file's text (stripped) scored against entry["ground_truth"]."""
        if self.runtime is None:
            raise RuntimeError("compute_final_reward() before reset(): no sandbox")
        out, _ = self.runtime.run("cat %s/answer.txt 2>/dev/null || echo ''" % self.output_dir)
        answer = out.strip()
        ground_truth = self.entry["ground_truth"]
        kwargs = {k: v for k, v in self.entry.items() if k != "ground_truth"}
        if self.reward_fn is not None:
            reward = float(self.reward_fn(answer, ground_truth, **kwargs))
        elif self._agent_impl is not None:
            from concurrent.futures import ProcessPoolExecutor
            try:  # as the original: a process of its own (math_verify's timeouts use threads)
                with ProcessPoolExecutor(max_workers=1) as pool:
                    reward = pool.submit(_score_in_process, answer, ground_truth,
                                         kwargs).result(timeout=REWARD_TIMEOUT)
            except Exception as e:
                raise RuntimeError("Error computing reward for %s: %s"
                                   % (self.entry.get("domain"), e)) from e
        else:
            raise NotImplementedException(
                "compute_final_reward() needs reward_fn= or the llm_in_sandbox package: lis "
                "serve scores a group's episodes, not one sandbox (step mode's POST "
                "/lis/v1/envs/{id}/reward, issue 31)")
        logger.info("[Score] domain=%s | score=%.2f", self.entry.get("domain"), reward)
        return reward

    def close(self) -> None:
        """Deletes the sandbox and the local copy of the input files (again: nothing)."""
        if self.runtime is not None:
            try:
                self.runtime.close()
            except Exception as e:
                logger.warning("Error closing runtime: %s", e)
            self.runtime = None
        if self._temp_dir:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    @staticmethod
    def from_dict(extra_info) -> "LLMinSandboxEnv":
        """An env from a data row's extra_info (a dict or its JSON): docker_image,
        step_timeout, verbose, working_dir, input_dir, output_dir are taken out
        of it, the rest is the entry, as the original does."""
        if isinstance(extra_info, str):
            extra_info = json.loads(extra_info)
        return LLMinSandboxEnv(
            entry=extra_info,
            docker_image=extra_info.pop("docker_image", DEFAULT_IMAGE),
            step_timeout=extra_info.pop("step_timeout", 120),
            verbose=extra_info.pop("verbose", False),
            working_dir=extra_info.pop("working_dir", None),
            input_dir=extra_info.pop("input_dir", None),
            output_dir=extra_info.pop("output_dir", None))

    @staticmethod
    def is_multithread_safe() -> bool:
        return True
