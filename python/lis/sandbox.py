"""lis.Sandbox: a lis sandbox through lis serve's native API, shaped like E2B's Sandbox."""
import base64
import urllib.parse
from dataclasses import dataclass
from typing import Callable, List, Optional, Union

from ._http import Client, events
from .errors import NotFoundException, SandboxException, TimeoutException


@dataclass
class CommandResult:
    exit_code: int
    stdout: str
    stderr: str
    error: Optional[str] = None


@dataclass
class EntryInfo:
    name: str
    path: str
    type: str   # "file", "dir", "symlink" or "other"
    size: int


def _q(path):
    return urllib.parse.quote(path, safe="/")


class Commands:
    def __init__(self, sb):
        self._sb = sb

    def run(self, cmd: Union[str, List[str]], timeout: Optional[float] = 60, envs=None,
            cwd: Optional[str] = None, on_stdout: Optional[Callable[[str], None]] = None,
            on_stderr: Optional[Callable[[str], None]] = None) -> CommandResult:
        """Runs cmd (a shell string, or an argv list) to its end. The result holds
        the exit code and all output, whatever the exit code (E2B raises on a
        non-zero one; RL code mostly wants the code). on_stdout/on_stderr get each
        chunk as it arrives. Raises TimeoutException when timeout (seconds; None
        or 0: none) passes: the command is killed."""
        body = {"cmd": cmd, "timeout": timeout or 0}
        if envs:
            body["env"] = dict(envs)
        if cwd:
            body["cwd"] = cwd
        resp = self._sb._client.open("POST", "sandboxes/%s/exec" % self._sb.sandbox_id, body)
        out, err, end = [], [], None
        try:
            for name, data in events(resp):
                if name in ("stdout", "stderr"):
                    text = base64.b64decode(data["data"]).decode(errors="replace")
                    (out if name == "stdout" else err).append(text)
                    cb = on_stdout if name == "stdout" else on_stderr
                    if cb:
                        cb(text)
                elif name == "exit":
                    end = data
        finally:
            resp._lis_conn.close()
        if end is None:
            raise SandboxException("the command's stream ended without an exit event")
        if end.get("timed_out"):
            raise TimeoutException("the command ran longer than its timeout (%s s) and was killed"
                                   % timeout)
        return CommandResult(int(end["exit_code"]), "".join(out), "".join(err), end.get("error"))


class Files:
    def __init__(self, sb):
        self._sb = sb

    def _path(self, op, path):
        return "sandboxes/%s/files%s?path=%s" % (self._sb.sandbox_id, op, _q(path))

    def read(self, path: str, format: str = "text") -> Union[str, bytes]:
        data = self._sb._client.call("GET", self._path("", path), raw=True)
        return data if format == "bytes" else data.decode()

    def write(self, path: str, data: Union[str, bytes]) -> EntryInfo:
        if isinstance(data, str):
            data = data.encode()
        self._sb._client.call("PUT", self._path("", path), body=data,
                              headers={"Content-Type": "application/octet-stream"})
        return self.get_info(path)

    def list(self, path: str) -> List[EntryInfo]:
        doc = self._sb._client.call("GET", self._path("/list", path))
        return [EntryInfo(e["name"], e["path"], e["type"], int(e["size"])) for e in doc["entries"]]

    def get_info(self, path: str) -> EntryInfo:
        doc = self._sb._client.call("GET", self._path("/stat", path))
        name = doc["path"].rstrip("/").rsplit("/", 1)[-1] or "/"
        return EntryInfo(name, doc["path"], doc["type"], int(doc["size"]))

    def exists(self, path: str) -> bool:
        try:
            self.get_info(path)
            return True
        except NotFoundException:
            return False


class Sandbox:
    """A lis sandbox. Sandbox.create(...) makes one; sb.kill() (or leaving a
    `with` block) deletes it."""

    def __init__(self, info, client):
        self._client = client
        self._info = info
        self.sandbox_id = info["id"]
        self.commands = Commands(self)
        self.files = Files(self)

    @classmethod
    def create(cls, image: str, memory: Union[int, str, None] = None, net: Optional[str] = None,
               envs=None, name: Optional[str] = None, idempotency_key: Optional[str] = None,
               socket: Optional[str] = None) -> "Sandbox":
        """image: a tag of lis's rootfs store; memory: bytes or "512m"; net:
        none, proxy or host (default: the server's). A retried create with the
        same idempotency_key returns the same sandbox."""
        client = Client(socket)
        body = {"image": image}
        if memory is not None:
            body["memory"] = memory
        if net is not None:
            body["net"] = net
        if envs:
            body["env"] = dict(envs)
        if name:
            body["name"] = name
        hdrs = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return cls(client.call("POST", "sandboxes", body, hdrs), client)

    @classmethod
    def connect(cls, sandbox_id: str, socket: Optional[str] = None) -> "Sandbox":
        client = Client(socket)
        return cls(client.call("GET", "sandboxes/%s" % _q(sandbox_id)), client)

    @classmethod
    def list(cls, socket: Optional[str] = None):
        return Client(socket).call("GET", "sandboxes")

    def get_info(self):
        self._info = self._client.call("GET", "sandboxes/%s" % self.sandbox_id)
        return self._info

    def is_running(self) -> bool:
        try:
            return self.get_info()["state"] == "running"
        except NotFoundException:
            return False

    def kill(self) -> bool:
        """Deletes the sandbox; False when it was already gone."""
        try:
            self._client.call("DELETE", "sandboxes/%s" % self.sandbox_id)
            return True
        except NotFoundException:
            return False

    def snapshot(self, tag: str):
        return self._client.call("POST", "sandboxes/%s/snapshot" % self.sandbox_id, {"tag": tag})

    def pause(self):
        return self._client.call("POST", "sandboxes/%s/pause" % self.sandbox_id, {})

    def resume(self):
        return self._client.call("POST", "sandboxes/%s/resume" % self.sandbox_id, {})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        return False
