"""lis.rllm_env.LLMinSandboxEnv, the original RL code's environment on a lis
sandbox, driven as rLLM's engine drives it (from_dict of a data row, reset,
steps from a thread pool, compute_final_reward, close) against the real
lis serve of conftest.py."""
import concurrent.futures
import json
import sys
import types

import pytest

import lis
from conftest import IMAGE
from lis.docker_runtime import DockerRuntime
from lis.rllm_env import LLMinSandboxEnv, parse_action


def row(i):
    return {"id": "r%d" % i, "domain": "math", "problem_statement": "add the numbers",
            "ground_truth": str(10 + i), "qa_type": "exact",
            "input_files": json.dumps({"a.txt": "10\n", "deep/b.txt": "%d\n" % i}),
            "docker_image": IMAGE, "step_timeout": 30}


def exact(answer, ground_truth, **kw):
    assert kw["domain"] == "math" and "ground_truth" not in kw
    return 1.0 if answer == ground_truth else 0.0


def bash(cmd):
    return "<function=execute_bash>\n<parameter=command>%s</parameter>\n</function>" % cmd


def test_parse_action_shapes():
    class Act:  # llm_in_sandbox's / R2E-Gym's Action
        function_name, parameters = "execute_bash", {"command": "ls"}
    wrapped = types.SimpleNamespace(action=Act())  # rLLM's Action(action=...)
    call = {"id": "c1", "type": "function",
            "function": {"name": "execute_bash", "arguments": '{"command": "ls"}'}}
    for a in (Act(), wrapped, call, bash("ls"), {"function_name": "execute_bash",
                                                  "parameters": {"command": "ls"}}):
        assert parse_action(a) == ("execute_bash", {"command": "ls"})
    assert parse_action("no call here") == ("", {})
    assert parse_action(None) == ("", {})
    assert parse_action({"function": {"name": "x", "arguments": "{bad"}}) == ("x", None)
    with pytest.raises(TypeError, match="an action is"):
        parse_action(42)


def test_the_original_envs_calls_on_a_lis_sandbox(server):
    def episode(i):
        env = LLMinSandboxEnv.from_dict(json.dumps(row(i)))
        env.reward_fn = exact
        assert env.tools == "exec"  # no llm_in_sandbox package here
        assert (env.docker_image, env.step_timeout, env.working_dir, env.input_dir,
                env.output_dir) == (IMAGE, 30, "/testbed", "/testbed/documents", "/testbed/")
        assert "docker_image" not in env.entry and env.entry["id"] == "r%d" % i
        assert LLMinSandboxEnv.is_multithread_safe()
        try:
            obs, info = env.reset()
            assert obs == "add the numbers" and info == {"extra_info": env.entry}
            assert isinstance(env.runtime, DockerRuntime)
            sid = env.runtime.container.sandbox_id
            obs, reward, done, info = env.step(bash(
                "cat documents/a.txt documents/deep/b.txt | paste -sd+ | "
                "python3 -c 'print(eval(input()))' | tee answer.txt; echo note >&2"))
            assert (reward, done, info) == (0.0, False, {})
            assert obs == ("Exit code: 0\nExecution output of \\[execute_bash]:\n\\[STDOUT]\n"
                           "%d\n\n\\[STDERR]\nnote\n" % (10 + i))
            # an OpenAI tool call as a dict; a failing command; no stderr section when blank
            obs, _, _, _ = env.step({"function": {"name": "execute_bash",
                                                  "arguments": '{"command": "exit 3"}'}})
            assert obs == ("Exit code: Error: Exit code 3\nExecution output of "
                           "\\[execute_bash]:\n\\[STDOUT]\n")
            assert env.step(bash(""))[0] == "Error: No command provided."
            with pytest.raises(lis.NotImplementedException, match="envs/{id}/step"):
                env.step({"function_name": "str_replace_editor",
                          "parameters": {"command": "view", "path": "/testbed"}})
            assert env.step("<function=submit>\n</function>") == ("<<< Finished >>>", 0.0,
                                                                  True, {})
            assert env.total_steps == 5
            reward = env.compute_final_reward()
            env.reset()  # a new sandbox: nothing of the old one's answer
            assert env.runtime.container.sandbox_id != sid and env.total_steps == 0
            return reward, env.compute_final_reward(), sid
        finally:
            env.close()
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(episode, range(3)))
    assert [(r1, r2) for r1, r2, _ in results] == [(1.0, 0.0)] * 3
    live = {s.sandbox_id for s in lis.Sandbox.list()}
    assert not live & {sid for _, _, sid in results}  # every one closed


def test_without_a_scorer_the_reward_says_what_is_missing(server):
    env = LLMinSandboxEnv(dict(row(0), ground_truth="10"), docker_image=IMAGE)
    try:
        env.reset()
        with pytest.raises(lis.NotImplementedException, match="reward_fn= or the llm_in_sandbox"):
            env.compute_final_reward()
    finally:
        env.close()
    assert env.runtime is None
    env.close()  # again: nothing


def test_with_the_original_package_its_own_tools_run_over_the_lis_sandbox(server, monkeypatch):
    """Where llm_in_sandbox is installed (as it is for the original's training code),
    step() hands the action to its Agent._execute_action with lis's runtime, as the
    original env does. A stand-in package records what it was given."""
    calls = []

    class Action:
        def __init__(self, function_name="", parameters=None):
            self.function_name, self.parameters = function_name, parameters or {}

        @classmethod
        def from_string(cls, text):
            return cls("from_string", {"text": text})

    class Agent:
        def __init__(self):
            raise AssertionError("the original makes its Agent without __init__")

        def _execute_action(self, action, runtime):
            calls.append((action.function_name, action.parameters, runtime))
            out, err, code = runtime.demux_run(action.parameters.get("command", "true"))
            return "original:%s:%s" % (code, out)

    pkg = types.ModuleType("llm_in_sandbox")
    pkg.Action = Action
    agent_mod = types.ModuleType("llm_in_sandbox.agent")
    agent_mod.Agent = Agent
    pkg.agent = agent_mod
    monkeypatch.setitem(sys.modules, "llm_in_sandbox", pkg)
    monkeypatch.setitem(sys.modules, "llm_in_sandbox.agent", agent_mod)
    env = LLMinSandboxEnv(row(1), docker_image=IMAGE, reward_fn=exact)
    assert env.tools == "llm_in_sandbox"
    with pytest.raises(ValueError):
        LLMinSandboxEnv(row(1), tools="docker")
    try:
        env.reset()
        obs = env.step(Action("execute_bash", {"command": "cat documents/deep/b.txt"}))
        assert obs == ("original:0:1\n", 0.0, False, {})
        env.step(types.SimpleNamespace(function_name="submit", parameters={}))
        env.step("<function=x></function>")
        assert [(n, p) for n, p, _ in calls] == [
            ("execute_bash", {"command": "cat documents/deep/b.txt"}), ("submit", {}),
            ("from_string", {"text": "<function=x></function>"})]
        assert all(rt is env.runtime for _, _, rt in calls)
    finally:
        env.close()
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(bash("true"))


def test_a_broken_original_package_is_an_error_not_a_quiet_fallback(monkeypatch):
    pkg = types.ModuleType("llm_in_sandbox")  # installed, but its agent cannot be imported
    pkg.Action = object
    monkeypatch.setitem(sys.modules, "llm_in_sandbox", pkg)
    with pytest.raises(ImportError, match="llm_in_sandbox"):
        LLMinSandboxEnv(row(0), docker_image=IMAGE)
    assert LLMinSandboxEnv(row(0), docker_image=IMAGE, tools="exec").tools == "exec"
