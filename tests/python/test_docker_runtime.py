"""lis.docker_runtime.DockerRuntime, the drop-in for LLM-in-Sandbox's, driven
through the call sequences the original makes (docs/integrations.md):

- its benchmark runner (benchmark/runner.py, create_agent_runner): construct
  with repo_path=working_dir and a quiet logger, atexit.register(close), the
  row's input_files written to a temp dir and copy_dir_to_container(tmp,
  "/testbed/documents"), the agent's tool calls (execute_bash -> demux_run;
  str_replace_editor -> run() of test/cat/echo commands), then
  run("cat /testbed/answer.txt 2>/dev/null || echo ''"), atexit.unregister,
  close();
- rLLM's LLMinSandboxEnv: reset() constructs with logger=False and copies the
  input files (a JSON string, nested names too) to /testbed/documents, step()
  executes actions, compute_final_reward() runs
  "cat /testbed//answer.txt 2>/dev/null || echo ''", close(); envs built and
  stepped from a thread pool;
- its CLI (`llm-in-sandbox run`): copy_dir_to_container(input_dir,
  "/testbed/input"), then copy_from_container("/testbed/output", run/files).
"""
import atexit
import concurrent.futures
import json
import logging
import os
import shutil
import stat
import sys
import tempfile
import types

import pytest

import lis
from conftest import IMAGE
from lis.docker_runtime import DOCKER_PATH, DockerRuntime, patch_llm_in_sandbox


def bash_tool(rt, command):
    """What the agent's execute_bash does with the runtime."""
    return rt.demux_run(command)


def editor_create(rt, path, text):
    """The agent's str_replace_editor create: an echo through run()."""
    escaped = text.replace("'", "'\"'\"'")
    return rt.run(f"mkdir -p $(dirname {path}) && echo '{escaped}' > {path}")


def editor_kind(rt, path):
    out, _ = rt.run(f"test -d {path} && echo 'dir' || (test -f {path} && echo 'file' || echo 'notfound')")
    return out.strip()


def test_benchmark_call_sequence(server, tmp_path):
    logger = logging.getLogger("benchmark")
    logger.setLevel(logging.WARNING)
    rt = DockerRuntime(docker_image=IMAGE, repo_path="/testbed", logger=logger)
    atexit.register(rt.close)
    try:
        assert isinstance(rt.container, lis.Sandbox) and rt.sandbox is rt.container
        # setup_env: the working dir with input/ and output/ (no pip mirror written)
        assert rt.run("ls -d /testbed/input /testbed/output") == (
            "/testbed/input\n/testbed/output\n", "0")
        assert rt.run("cat ~/.pip/pip.conf /etc/pip.conf 2>&1 | grep -c tsinghua")[0] == "0\n"
        input_files = {"numbers.txt": "3\n4\n5\n", "notes.md": "it's a note\n"}
        temp_dir = tempfile.mkdtemp(dir=tmp_path)
        for name, content in input_files.items():
            with open(os.path.join(temp_dir, name), "w") as f:
                f.write(content)
        rt.copy_dir_to_container(temp_dir, "/testbed/documents")

        # execute_bash -> demux_run: stdout and stderr apart, exit as text, cwd /testbed
        out, err, code = bash_tool(rt, "pwd; cat documents/numbers.txt | paste -sd+ | "
                                       "python3 -c 'print(eval(input()))'; echo warn >&2")
        assert (out, err, code) == ("/testbed\n12\n", "warn\n", "0")
        assert bash_tool(rt, "echo out; echo err >&2; exit 3") == ("out\n", "err\n",
                                                                   "Error: Exit code 3")
        # a fresh shell per call: cd and export do not carry over
        bash_tool(rt, "cd /tmp; export GONE=1")
        assert bash_tool(rt, "pwd; echo ${GONE:-unset}")[0] == "/testbed\nunset\n"
        # the environment of the original's containers
        env = bash_tool(rt, "echo $PATH; echo $PIP_DISABLE_PIP_VERSION_CHECK "
                            "$PIP_ROOT_USER_ACTION $PIP_NO_WARN_SCRIPT_LOCATION")[0]
        assert env == DOCKER_PATH + "\n1 ignore 1\n"
        # colour codes and \r are stripped
        assert bash_tool(rt, r"printf '\033[1;31mred\033[0m\r\n'")[0] == "red\n"
        # the timeout: the original's text and "-1"
        assert rt.demux_run("sleep 30", timeout=1) == (
            "The command took too long to execute (>1s)", "", "-1")
        assert rt.run("sleep 30", timeout=1) == ("The command took too long to execute (>1s)",
                                                 "-1")
        # run() merges stderr into the output, in order
        assert rt.run("echo a; echo b >&2; sleep 0.2; echo c") == ("a\nb\nc\n", "0")
        assert rt.run("exit 124") == ("", "Error: Exit code 124")
        assert rt.run("pwd", workdir="/tmp") == ("/tmp\n", "0")

        # str_replace_editor: view's test -d/-f, create's echo, cat
        assert editor_kind(rt, "/testbed/documents") == "dir"
        assert editor_kind(rt, "/testbed/documents/notes.md") == "file"
        assert editor_kind(rt, "/testbed/nope") == "notfound"
        assert editor_create(rt, "/testbed/solve.py", "print('\\\\boxed{12}')") == ("", "0")
        assert rt.run("cat /testbed/solve.py") == ("print('\\\\boxed{12}')\n", "0")
        out, err, code = bash_tool(rt, "python3 solve.py > /testbed/answer.txt")
        assert code == "0", err
        answer, _ = rt.run("cat /testbed/answer.txt 2>/dev/null || echo ''")
        assert answer.strip() == "\\boxed{12}"
    finally:
        atexit.unregister(rt.close)
        rt.close()
    assert rt.container is None
    rt.close()  # again: nothing


class Env:
    """The calls rLLM's LLMinSandboxEnv makes on the runtime."""

    def __init__(self, entry):
        self.entry, self.runtime, self._temp_dir = entry, None, None
        self.output_dir = "/testbed/"

    def reset(self):
        if self.runtime is not None:
            self.close()
        self.runtime = DockerRuntime(docker_image=IMAGE, repo_path="/testbed", logger=False)
        files = json.loads(self.entry["input_files"])
        self._temp_dir = tempfile.mkdtemp()
        for name, content in files.items():
            p = os.path.join(self._temp_dir, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as f:
                f.write(content)
        self.runtime.copy_dir_to_container(self._temp_dir, "/testbed/documents")
        return self.entry["problem_statement"], {"extra_info": self.entry}

    def step(self, command):
        return self.runtime.demux_run(command)

    def compute_final_reward(self):
        out, _ = self.runtime.run(f"cat {self.output_dir}/answer.txt 2>/dev/null || echo ''")
        return 1.0 if out.strip() == self.entry["ground_truth"] else 0.0

    def close(self):
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None
        if self._temp_dir:
            shutil.rmtree(self._temp_dir, ignore_errors=True)


def test_rl_environment_call_sequence(server):
    def episode(i):
        entry = {"problem_statement": "add the numbers", "ground_truth": str(10 + i),
                 "input_files": json.dumps({"a.txt": "10\n", "deep/b.txt": "%d\n" % i})}
        env = Env(entry)
        try:
            prompt, info = env.reset()
            assert prompt == "add the numbers" and info["extra_info"] is entry
            out, err, code = env.step("cat documents/a.txt documents/deep/b.txt | paste -sd+ |"
                                      " python3 -c 'print(eval(input()))' > answer.txt")
            assert code == "0", err
            reward_before_reset = env.compute_final_reward()
            sid = env.runtime.container.sandbox_id
            env.reset()  # a second episode on the same env: a new sandbox
            assert env.runtime.container.sandbox_id != sid
            assert env.compute_final_reward() == 0.0  # no answer in the fresh one
            return reward_before_reset, sid
        finally:
            env.close()
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(episode, range(4)))
    assert [r for r, _ in results] == [1.0] * 4
    assert len({sid for _, sid in results}) == 4
    live = {s.sandbox_id for s in lis.Sandbox.list()}
    assert not live & {sid for _, sid in results}  # every one closed


def test_cli_copies_in_and_out(server, tmp_path):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    (src / "data.csv").write_text("a,b\n")
    (src / "sub" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(src / "sub" / "run.sh", 0o755)
    rt = DockerRuntime(IMAGE, logger=False)
    try:
        rt.copy_dir_to_container(str(src), "/testbed/input")
        assert rt.run("cat input/data.csv; input/sub/run.sh") == ("a,b\nran\n", "0")
        rt.copy_to_container(str(src / "data.csv"), "/testbed/other dir/copy.csv")
        assert rt.run("cat '/testbed/other dir/copy.csv'") == ("a,b\n", "0")
        out, code = rt.run("mkdir -p output/plots && echo 42 > output/answer.txt && "
                           "printf 'x' > output/plots/p.bin && cp input/sub/run.sh output/ && "
                           "ln -s answer.txt output/link && ln -s /etc/passwd output/evil")
        assert code == "0", out
        files = tmp_path / "run" / "files"
        files.mkdir(parents=True)
        rt.copy_from_container("/testbed/output", str(files))
        assert (files / "answer.txt").read_text() == "42\n"
        assert (files / "plots" / "p.bin").read_bytes() == b"x"
        assert os.stat(files / "run.sh").st_mode & stat.S_IXUSR
        assert os.readlink(files / "link") == "answer.txt"
        assert not os.path.lexists(files / "evil")  # a link out of the directory: skipped
        # a single file comes out under its own name
        one = tmp_path / "one"
        rt.copy_from_container("/testbed/output/answer.txt", str(one))
        assert (one / "answer.txt").read_text() == "42\n"
        with pytest.raises(lis.NotFoundException):
            rt.copy_from_container("/testbed/nope", str(tmp_path / "none"))
    finally:
        rt.close()


def test_docker_kwargs_and_errors(server, caplog):
    with caplog.at_level(logging.WARNING):
        rt = DockerRuntime(IMAGE, logger=False, mem_limit="300m", network_mode="none",
                           environment={"EXTRA": "yes"}, privileged=True)
    try:
        info = rt.container.get_info()
        assert info["memory"] == 300 << 20 and info["net"] == "none"
        assert rt.demux_run("echo $EXTRA")[0] == "yes\n"
        assert "privileged" in caplog.text
        assert rt.container_name.startswith("lis-test-v1-")
        assert rt.container.get_info()["name"] == rt.container_name
        assert rt.get_task_instruction("task") == "task"
        assert rt.command == "sleep infinity" and rt.repo_path == "/testbed"
    finally:
        rt.close()
    with pytest.raises(lis.NotFoundException):
        DockerRuntime("no-such-image:v0", logger=False)


def test_run_after_the_sandbox_went_away(server):
    rt = DockerRuntime(IMAGE, logger=False)
    rt.container.kill()
    out, err, code = rt.demux_run("echo hi")
    assert code == "-1" and out.startswith("Error: NotFoundException(") and err == out
    out, code = rt.run("echo hi")
    assert code == "-1" and out.startswith("Error: NotFoundException(")
    rt.close()


def test_patch_llm_in_sandbox(monkeypatch):
    class Original:
        pass
    pkg = types.ModuleType("llm_in_sandbox")
    sub = types.ModuleType("llm_in_sandbox.docker_runtime")
    env_mod = types.ModuleType("rllm_env_stub")  # did `from llm_in_sandbox import DockerRuntime`
    pkg.DockerRuntime = sub.DockerRuntime = env_mod.DockerRuntime = Original
    pkg.docker_runtime = sub
    monkeypatch.setitem(sys.modules, "llm_in_sandbox", pkg)
    monkeypatch.setitem(sys.modules, "llm_in_sandbox.docker_runtime", sub)
    monkeypatch.setitem(sys.modules, "rllm_env_stub", env_mod)
    patched = patch_llm_in_sandbox()
    assert pkg.DockerRuntime is DockerRuntime and sub.DockerRuntime is DockerRuntime
    assert env_mod.DockerRuntime is DockerRuntime
    assert {"llm_in_sandbox", "llm_in_sandbox.docker_runtime", "rllm_env_stub"} <= set(patched)
