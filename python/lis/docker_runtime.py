"""A drop-in for LLM-in-Sandbox's `llm_in_sandbox.docker_runtime.DockerRuntime`,
backed by a lis sandbox (lis.Sandbox) instead of a Docker container.

Same constructor (docker_image, repo_path, command, logger, **docker_kwargs) and
methods (setup_env, run, demux_run, copy_to_container, copy_dir_to_container,
copy_from_container, get_task_instruction, close), same return shapes and the
same texts where the agent shows them to the model:

    run(code, timeout=120, workdir=None)       -> (output, exit)       stderr merged
    demux_run(code, timeout=120, workdir=None) -> (stdout, stderr, exit)
    exit: "0", "Error: Exit code N", or "-1" with the output
          "The command took too long to execute (>Ns)" (timeout) or "Error: <repr>"

RL code swaps its import (see docs/integrations.md):

    from lis.docker_runtime import DockerRuntime   # was: from llm_in_sandbox import DockerRuntime

or, to leave the original package's code untouched, calls
lis.docker_runtime.patch_llm_in_sandbox() before it builds a runtime.

Where it differs from the original, on purpose:
- no pip mirror: the original's setup_env points pip at a hard-coded Tsinghua mirror
  (pypi.tuna.tsinghua.edu.cn); this one leaves pip's configuration alone;
- the timeout is lis's own (the whole command is killed), not `timeout N bash -c`
  whose background children survive; so a command that itself exits 124 is reported
  as exit 124, not as a timeout;
- paths given to mkdir are quoted (the original breaks on spaces);
- copy_from_container extracts only what stays inside local_path (no absolute
  paths, "..", links out, or devices), and a single file comes out as
  local_path/<name> (the original drops it);
- container names add a uuid4, so threads of one process never collide;
- `command` is kept as an attribute only: a lis sandbox needs no keep-alive process;
- `container` is the lis.Sandbox, not a docker-py Container.
"""
import datetime
import hashlib
import io
import logging
import os
import re
import shlex
import tarfile
import uuid
from typing import Tuple

from .errors import TimeoutException
from .sandbox import Sandbox

CMD_TIMEOUT = 120  # seconds, as llm_in_sandbox.CMD_TIMEOUT
DOCKER_PATH = ("/root/.local/bin:/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:"
               "/usr/sbin:/usr/bin:/sbin:/bin")
BASE_ENV = {
    "PATH": DOCKER_PATH,
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_ROOT_USER_ACTION": "ignore",
    "PIP_NO_WARN_SCRIPT_LOCATION": "1",
}
# what the original strips from every output: SGR colour sequences and \r
_ANSI = re.compile(r"\x1b\[[0-9;]*m|\r")
# docker-py keyword arguments this runtime maps onto lis; any other is ignored with a warning
_MAPPED = {"environment", "mem_limit", "network_mode", "network_disabled", "lis_socket",
           "lis_net"}


def get_logger(name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    if not logger.handlers:
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
        logger.addHandler(h)
        logger.setLevel(logging.INFO)
    return logger


def _net_of(kw):
    if kw.get("lis_net"):
        return kw["lis_net"]
    if kw.get("network_disabled") or kw.get("network_mode") == "none":
        return "none"
    if kw.get("network_mode") == "host":
        return "host"
    return None  # the server's default


def _unsafe(member, root):
    """Why a tar member may not be extracted under root, or None."""
    name = member.name
    if os.path.isabs(name) or ".." in name.split("/"):
        return "a path outside the directory"
    if member.isdev() or member.isfifo():
        return "a device or fifo"
    if member.issym() or member.islnk():
        base = root if member.islnk() else os.path.dirname(os.path.join(root, name))
        target = os.path.normpath(os.path.join(base, member.linkname))
        if os.path.isabs(member.linkname) or not (target == root or
                                                   target.startswith(root + os.sep)):
            return "a link out of the directory"
    return None


class DockerRuntime:
    """A lis sandbox with the interface of LLM-in-Sandbox's DockerRuntime."""

    def __init__(self, docker_image: str, repo_path: str = "/testbed",
                 command: str = "sleep infinity", logger=None, **docker_kwargs):
        self.docker_image = docker_image
        self.repo_path = repo_path
        self.command = command
        self.docker_kwargs = docker_kwargs
        if logger is None:
            self.logger = get_logger("DockerRuntime")
        elif logger is False:  # quiet: warnings and errors only
            self.logger = logging.getLogger("DockerRuntime.quiet")
            self.logger.setLevel(logging.WARNING)
        else:
            self.logger = logger
        self.container = None
        self.container_name = self._get_container_name(docker_image)
        self.start_container(docker_image, command, self.container_name, **docker_kwargs)
        self.setup_env()
        self.logger.info("lis sandbox %s ready (image %s)", self.container.sandbox_id,
                         docker_image)

    @staticmethod
    def _get_container_name(image_name: str) -> str:
        unique = "%s%d%s" % (datetime.datetime.now(), os.getpid(), uuid.uuid4())
        clean = re.sub(r"[^a-zA-Z0-9_.-]", "-", image_name).lstrip("-_.") or "lis"
        return "%s-%s" % (clean[:60], hashlib.sha256(unique.encode()).hexdigest()[:10])

    def start_container(self, docker_image: str, command: str, container_name: str,
                        **docker_kwargs):
        """Creates the sandbox (docker_image is a tag of lis's rootfs store, or a
        snapshot). environment, mem_limit and network_mode/network_disabled of
        docker_kwargs are honoured; lis_socket picks the lis serve socket."""
        ignored = sorted(set(docker_kwargs) - _MAPPED)
        if ignored:
            self.logger.warning("DockerRuntime on lis ignores docker arguments: %s",
                                ", ".join(ignored))
        env = dict(BASE_ENV)
        env.update(docker_kwargs.get("environment") or {})
        self._env = env
        self.container = Sandbox.create(image=docker_image, memory=docker_kwargs.get("mem_limit"),
                                        net=_net_of(docker_kwargs), envs=env, name=container_name,
                                        socket=docker_kwargs.get("lis_socket"))
        self.logger.info("Started sandbox: %s", container_name)

    @property
    def sandbox(self) -> Sandbox:
        return self.container

    def setup_env(self):
        """The working directory with input/ and output/ in it, and a git repository
        there when git is installed. (No pip mirror: see the module's docstring.)"""
        p = shlex.quote(self.repo_path)
        self.run("mkdir -p %s %s/input %s/output && { cd %s && git init >/dev/null 2>&1 || true; }"
                 % (p, p, p, p), workdir="/")

    def _run(self, code, timeout, workdir, merged):
        parts = []
        r = self.container.commands.run(
            ["bash", "-c", code], timeout=timeout, envs=self._env,
            cwd=self.repo_path if workdir is None else workdir,
            on_stdout=lambda t: parts.append((1, t)),
            on_stderr=lambda t: parts.append((1 if merged else 2, t)))
        out = "".join(t for s, t in parts if s == 1)
        err = "".join(t for s, t in parts if s == 2)
        if r.error and r.exit_code == 127 and not out and not err:
            err = r.error  # bash itself could not be started
            if merged:
                out, err = err, ""
        return _ANSI.sub("", out), _ANSI.sub("", err), r.exit_code

    @staticmethod
    def _code(exit_code):
        return str(exit_code) if exit_code == 0 else "Error: Exit code %d" % exit_code

    def run(self, code: str, timeout: int = CMD_TIMEOUT, workdir: str = None) -> Tuple[str, str]:
        """Runs code with bash in the sandbox (cwd: workdir, else repo_path);
        returns (output with stderr merged, exit) as the original does."""
        try:
            out, _, rc = self._run(code, timeout, workdir, merged=True)
            return out, self._code(rc)
        except TimeoutException:
            return "The command took too long to execute (>%ss)" % timeout, "-1"
        except Exception as e:  # the original turns every failure into an observation
            return "Error: %r" % (e,), "-1"

    def demux_run(self, code: str, timeout: int = CMD_TIMEOUT,
                  workdir: str = None) -> Tuple[str, str, str]:
        """As run(), with stdout and stderr apart: (stdout, stderr, exit)."""
        try:
            out, err, rc = self._run(code, timeout, workdir, merged=False)
            return out, err, self._code(rc)
        except TimeoutException:
            return "The command took too long to execute (>%ss)" % timeout, "", "-1"
        except Exception as e:
            msg = "Error: %r" % (e,)
            return msg, msg, "-1"

    def _mkdir(self, path):
        out, code = self.run("mkdir -p -- %s" % shlex.quote(path), workdir="/")
        if code != "0":
            raise RuntimeError("mkdir -p %s in the sandbox: %s %s" % (path, code, out.strip()))

    def copy_to_container(self, src_path: str, dest_path: str):
        """Copies the host file (or directory) src_path to dest_path in the sandbox."""
        try:
            dest_dir = os.path.dirname(dest_path) or "/"
            self._mkdir(dest_dir)
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                tar.add(src_path, arcname=os.path.basename(dest_path))
            self.container.files.put_archive(dest_dir, buf.getvalue())
            self.logger.info("Copied %s to %s", src_path, dest_path)
        except Exception as e:
            self.logger.error("Error copying file to container: %r", e)
            raise

    def copy_dir_to_container(self, src_dir: str, dest_dir: str):
        """Copies what is in the host directory src_dir into dest_dir in the sandbox."""
        try:
            self._mkdir(dest_dir)
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                for item in sorted(os.listdir(src_dir)):
                    tar.add(os.path.join(src_dir, item), arcname=item)
            self.container.files.put_archive(dest_dir, buf.getvalue())
            self.logger.info("Copied directory %s to %s", src_dir, dest_dir)
        except Exception as e:
            self.logger.error("Error copying directory to container: %r", e)
            raise

    def copy_from_container(self, container_path: str, local_path: str):
        """Copies container_path out of the sandbox: a directory's contents into the
        host directory local_path (made if missing), a file to local_path/<name>.
        Members that would land outside local_path are skipped with a warning."""
        try:
            data = self.container.files.get_archive(container_path)
            os.makedirs(local_path, exist_ok=True)
            root = os.path.realpath(local_path)
            base = os.path.basename(container_path.rstrip("/"))
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
                members = tar.getmembers()
                is_dir = any(m.name == base and m.isdir() for m in members)
                for m in members:
                    if is_dir:
                        if m.name == base:
                            continue
                        if m.name.startswith(base + "/"):
                            m.name = m.name[len(base) + 1:]
                    if not m.name:
                        continue
                    why = _unsafe(m, root)
                    if why:
                        self.logger.warning("copy_from_container: skipped %s (%s)", m.name, why)
                        continue
                    parent = os.path.dirname(os.path.join(root, m.name))
                    os.makedirs(parent, exist_ok=True)
                    if hasattr(tarfile, "data_filter"):
                        tar.extract(m, path=root, filter="data")
                    else:
                        tar.extract(m, path=root)
            self.logger.info("Copied %s from container to %s", container_path, local_path)
        except Exception as e:
            self.logger.error("Error copying from container: %r", e)
            raise

    def get_task_instruction(self, problem_statement: str) -> str:
        return problem_statement

    def close(self):
        """Deletes the sandbox (again: nothing)."""
        sb, self.container = self.container, None
        if sb is not None:
            try:
                sb.kill()
                self.logger.info("Sandbox %s removed", self.container_name)
            except Exception as e:
                self.logger.warning("Error removing sandbox: %s", e)

    def __del__(self):
        sb = getattr(self, "container", None)
        if sb is not None:
            try:
                sb.kill()
            except Exception:
                pass


def patch_llm_in_sandbox():
    """Makes the original package's DockerRuntime this one, for code that imports
    it from llm_in_sandbox (its benchmark runner, rLLM's LLMinSandboxEnv): patches
    llm_in_sandbox.DockerRuntime, llm_in_sandbox.docker_runtime.DockerRuntime and
    every already-imported module holding the original class. Call it before the
    first runtime is built. Returns the modules patched."""
    import sys
    import importlib
    patched = []
    originals = set()
    for name in ("llm_in_sandbox", "llm_in_sandbox.docker_runtime"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        old = getattr(mod, "DockerRuntime", None)
        if old is not None and old is not DockerRuntime:
            originals.add(old)
        mod.DockerRuntime = DockerRuntime
        patched.append(name)
    for name, mod in list(sys.modules.items()):
        try:
            hit = getattr(mod, "DockerRuntime", None) in originals
        except Exception:  # a module with an odd __getattr__
            continue
        if hit:
            mod.DockerRuntime = DockerRuntime
            patched.append(name)
    return patched
