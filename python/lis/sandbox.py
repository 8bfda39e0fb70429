"""lis.Sandbox: a lis sandbox through lis serve's native API, shaped like E2B's Sandbox."""
import base64
import codecs
import socket
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Union

from ._http import EXEC_GRACE, Client, events
from .effects import Effects
from .errors import (ConflictException, NotFoundException, SandboxException, TimeoutException,
                     from_status)


@dataclass
class CommandResult:
    exit_code: int
    stdout: str
    stderr: str
    error: Optional[str] = None
    effects: Optional[Effects] = None   # run(..., effects=True): what the command did


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
            on_stderr: Optional[Callable[[str], None]] = None,
            effects: bool = False) -> CommandResult:
        """Runs cmd (a shell string, or an argv list) to its end. The result holds
        the exit code and all output, whatever the exit code (E2B raises on a
        non-zero one; RL code mostly wants the code). on_stdout/on_stderr get each
        chunk as it arrives. Raises TimeoutException when timeout (seconds; None
        or 0: none) passes: the command is killed. effects=True: the result's
        effects says what the command did in the sandbox (files, programs, network,
        resources, capability, policy alerts: docs/monitoring.md); one such command
        at a time per sandbox (ConflictException otherwise)."""
        body = {"cmd": cmd, "timeout": timeout or 0}
        if effects:
            body["effects"] = True
        if envs:
            body["env"] = dict(envs)
        if cwd:
            body["cwd"] = cwd
        # the stream may be silent as long as the command runs: wait that long (and
        # a grace), or without end for a command without a timeout
        wait = timeout + EXEC_GRACE if timeout else 0
        try:
            resp = self._sb._client.open("POST", "sandboxes/%s/exec" % self._sb.sandbox_id, body,
                                         timeout=wait)
        except ConflictException as e:
            if " is paused" in e.message:  # the runtime's line names the CLI's resume
                raise ConflictException("sandbox %s is paused: call sb.resume() first, then run "
                                        "the command (%s)" % (self._sb.sandbox_id, e.message),
                                        e.status) from None
            raise
        out, err, end = [], [], None
        # a chunk may end inside a UTF-8 character: decode each stream incrementally
        dec = {n: codecs.getincrementaldecoder("utf-8")(errors="replace")
               for n in ("stdout", "stderr")}

        def emit(name, text):
            if text:
                (out if name == "stdout" else err).append(text)
                cb = on_stdout if name == "stdout" else on_stderr
                if cb:
                    cb(text)
        try:
            for name, data in events(resp):
                if name in dec:
                    emit(name, dec[name].decode(base64.b64decode(data["data"])))
                elif name == "exit":
                    end = data
                    break  # always the last event: no need to wait for the stream's end
        except socket.timeout:
            raise TimeoutException("lis serve sent nothing for %.0f s while the command was "
                                   "to end within %s s" % (wait, timeout))
        finally:
            resp._lis_conn.close()
        for name, d in dec.items():
            emit(name, d.decode(b"", final=True))
        if end is None:
            raise SandboxException("the command's stream ended without an exit event")
        if end.get("timed_out"):
            raise TimeoutException("the command ran longer than its timeout (%s s) and was killed"
                                   % timeout)
        fx = end.get("effects")
        return CommandResult(int(end["exit_code"]), "".join(out), "".join(err), end.get("error"),
                             Effects.from_json(fx) if isinstance(fx, dict) and "step" in fx
                             else None)


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

    # Tar archives, as docker-py's put_archive/get_archive (lis serve's
    # Docker-compatible /containers/{id}/archive, which works on these sandboxes):
    # modes and symlinks kept, up to 1 GiB, where read/write carry one file.
    def put_archive(self, path: str, data: bytes) -> None:
        """Unpacks the tar `data` into the directory `path` (which must exist)."""
        self._sb._client.call("PUT", "containers/%s/archive?path=%s" % (self._sb.sandbox_id, _q(path)),
                              body=data, headers={"Content-Type": "application/x-tar"},
                              raw=True, prefix="/")

    def get_archive(self, path: str) -> bytes:
        """A tar of `path` (a file or a directory, under its base name)."""
        return self._sb._client.call("GET", "containers/%s/archive?path=%s"
                                     % (self._sb.sandbox_id, _q(path)), raw=True, prefix="/")


@dataclass
class Snapshot:
    """A snapshot: the files a sandbox had written (its writable layer, and its
    /tmp), stored as an image over the sandbox's own image. It holds files only,
    not processes: nothing that ran, no memory, no open connection is in it.
    Sandbox.create(image=snap.id, or its tag) starts new sandboxes from it."""
    id: str                       # "sha256:<hex>", usable as an image
    tag: Optional[str] = None     # "name:tag" (a name alone gets ":latest")
    parent: Optional[str] = None  # the image it is a layer over
    depth: int = 0                # layers of its chain, the base included
    files: int = 0
    bytes: int = 0
    paused_ms: Optional[float] = None  # how long the sandbox was paused to take it
    existed: bool = False         # the same files over the same parent were stored already
    reflinked: int = 0            # files shared with the sandbox by reflink, not copied
    tags: List[str] = field(default_factory=list)  # every tag (Sandbox.list_snapshots)
    created: Optional[str] = None
    source: Optional[str] = None  # what it was taken from
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def snapshot_id(self) -> str:
        """E2B's name for the id."""
        return self.id

    @classmethod
    def _from(cls, doc):
        tags = [t for t in doc.get("tags") or [] if isinstance(t, str)]
        tag = doc.get("tag") or (tags[0] if tags else None)
        return cls(id=doc.get("id", ""), tag=tag, parent=doc.get("parent"),
                   depth=int(doc.get("depth") or 0), files=int(doc.get("files") or 0),
                   bytes=int(doc.get("bytes", doc.get("size")) or 0),
                   paused_ms=doc.get("paused_ms"), existed=bool(doc.get("existed", False)),
                   reflinked=int(doc.get("reflinked") or 0), tags=tags or ([tag] if tag else []),
                   created=doc.get("created"), source=doc.get("source"), raw=doc)


@dataclass
class SandboxMetrics:
    """The sandbox's stats now (GET .../stats). E2B's names where they mean the
    same: mem_used, mem_total (its limit), disk_used, disk_total (its budget), in
    bytes; lis's own: cpu_seconds (CPU time all its processes used so far; flat
    while paused), pids; raw holds every field the server sent (docs/api.md).
    None where the server could not tell (or sets no limit)."""
    state: str
    cpu_seconds: Optional[float] = None
    mem_used: Optional[int] = None
    mem_total: Optional[int] = None
    disk_used: Optional[int] = None
    disk_total: Optional[int] = None
    pids: Optional[int] = None
    timestamp: float = 0.0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    def __getitem__(self, key):
        return self.raw[key]

    @staticmethod
    def _num(doc, *keys):
        for k in keys:
            v = doc.get(k)
            if isinstance(v, dict):  # {"current": n, ...}
                v = v.get("current")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return v
        return None

    @classmethod
    def _from(cls, doc):
        n = cls._num
        return cls(state=doc.get("state", ""), cpu_seconds=n(doc, "cpu_seconds"),
                   mem_used=n(doc, "memory_bytes", "memory"),
                   mem_total=n(doc, "memory_limit_bytes"),
                   disk_used=n(doc, "disk_bytes", "disk"), disk_total=n(doc, "disk_limit_bytes"),
                   pids=n(doc, "pids"), timestamp=time.time(), raw=doc)


class ForkResult(list):
    """What fork() returns: a list with one element per fork asked for, each a
    Sandbox or, where that fork failed, a SandboxException with the server's
    message; .snapshot is the Snapshot they all start from."""

    def __init__(self, items, snapshot):
        super().__init__(items)
        self.snapshot = snapshot


def _image_of(image):
    return image.id if isinstance(image, Snapshot) else image


def _key(idempotency_key):
    return {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}


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
    def create(cls, image: Union[str, Snapshot], memory: Union[int, str, None] = None,
               net: Optional[str] = None, envs=None, name: Optional[str] = None,
               idempotency_key: Optional[str] = None,
               socket: Optional[str] = None, timeout: Optional[float] = None,
               effects: bool = True, policy: Optional[str] = None) -> "Sandbox":
        """image: a tag of lis's rootfs store, or a snapshot (a Snapshot, its id
        "sha256:..." or its tag); memory: bytes or "512m"; net: none, proxy or
        host (default: the server's); timeout: seconds the sandbox lives (as
        E2B's, but None, the default, is no limit): the server deletes it then,
        even when this process died; set_timeout() changes it. Every create
        carries an Idempotency-Key
        (idempotency_key, else a new uuid4) and is sent again with it when the
        connection fails, so a retry never makes two sandboxes; a create with the
        key of a live sandbox returns that sandbox. effects=False: the sandbox records
        no effects (commands.run(effects=True) is refused then); policy: the text of
        a policy file (YAML, docs/monitoring.md) whose rules act on its commands."""
        client = Client(socket)
        body = {"image": _image_of(image)}
        if memory is not None:
            body["memory"] = memory
        if net is not None:
            body["net"] = net
        if envs:
            body["env"] = dict(envs)
        if name:
            body["name"] = name
        if timeout is not None:
            body["timeout"] = timeout
        if not effects:
            body["effects"] = False
        if policy is not None:
            body["policy"] = policy
        return cls(client.call("POST", "sandboxes", body, _key(idempotency_key), retry=True),
                   client)

    @classmethod
    def connect(cls, sandbox_id: str, socket: Optional[str] = None) -> "Sandbox":
        client = Client(socket)
        return cls(client.call("GET", "sandboxes/%s" % _q(sandbox_id), retry=True), client)

    @classmethod
    def list(cls, socket: Optional[str] = None) -> List["Sandbox"]:
        """Every sandbox of the server, as Sandbox objects (get_info() holds what the
        server said of each)."""
        client = Client(socket)
        return [cls(info, client) for info in client.call("GET", "sandboxes", retry=True)]

    @classmethod
    def list_snapshots(cls, socket: Optional[str] = None) -> List[Snapshot]:
        """The snapshots of the rootfs store (every one usable as an image)."""
        doc = Client(socket).call("GET", "snapshots", retry=True)
        if isinstance(doc, dict):  # {"snapshots": [...]}
            doc = doc.get("snapshots") or []
        return [Snapshot._from(d) for d in doc]

    @classmethod
    def get_snapshot(cls, ref: str, socket: Optional[str] = None) -> Snapshot:
        """One snapshot by tag or id (NotFoundException when there is none)."""
        return Snapshot._from(Client(socket).call("GET", "snapshots/%s" % _q(ref), retry=True))

    @classmethod
    def delete_snapshot(cls, ref, socket: Optional[str] = None) -> bool:
        """Deletes a snapshot (by tag, id or Snapshot) and all its tags from the store
        (E2B's name). ConflictException while a sandbox runs on it or another snapshot
        is made on it; NotFoundException when there is none. An untagged fork's
        snapshot needs no deleting: lis serve removes it with its last sandbox."""
        ref = ref.id if isinstance(ref, Snapshot) else ref
        Client(socket).call("DELETE", "snapshots/%s" % _q(ref))
        return True

    def get_info(self):
        """The sandbox as the server has it: id, name, image, state ("running",
        "paused", ...), memory, net, ..."""
        self._info = self._client.call("GET", "sandboxes/%s" % self.sandbox_id, retry=True)
        return self._info

    def is_running(self) -> bool:
        try:
            return self.get_info()["state"] == "running"
        except NotFoundException:
            return False

    def is_paused(self) -> bool:
        try:
            return self.get_info()["state"] == "paused"
        except NotFoundException:
            return False

    def kill(self) -> bool:
        """Deletes the sandbox; False when it was already gone."""
        try:
            self._client.call("DELETE", "sandboxes/%s" % self.sandbox_id)
            return True
        except NotFoundException:
            return False

    def set_timeout(self, timeout: float) -> None:
        """The sandbox is deleted `timeout` seconds from now (0: never), whoever
        holds it; get_info()["end_at"] says when (E2B's set_timeout)."""
        self._info = self._client.call("POST", "sandboxes/%s/timeout" % self.sandbox_id,
                                       {"timeout": timeout})

    def pause(self) -> str:
        """Stops every process of the sandbox (they keep their memory and cost no
        CPU) until resume(); commands.run is refused meanwhile (ConflictException),
        files can still be read and written. Returns the sandbox id (as E2B's)."""
        self._info = self._client.call("POST", "sandboxes/%s/pause" % self.sandbox_id, {})
        return self.sandbox_id

    def resume(self) -> "Sandbox":
        """Lets a paused sandbox's processes go on; returns the sandbox."""
        self._info = self._client.call("POST", "sandboxes/%s/resume" % self.sandbox_id, {})
        return self

    def get_metrics(self) -> SandboxMetrics:
        """Its stats now: state, cpu_seconds, mem_used, pids, disk_used (E2B's
        name; E2B answers a list of samples, lis the current one)."""
        return SandboxMetrics._from(self._client.call("GET", "sandboxes/%s/stats"
                                                      % self.sandbox_id, retry=True))

    def snapshot(self, tag: Optional[str] = None) -> Snapshot:
        """Snapshots the sandbox's files (its writable layer over its image) into
        lis's rootfs store, pausing it for as short a time as it takes. A snapshot
        holds the files only, not the processes: what runs now, and its memory,
        are not in it; a sandbox made from it starts fresh on those files. tag
        names it ("name:tag"; a name alone gets ":latest"), usable as an image as
        its id "sha256:..." is."""
        body = {"tag": tag} if tag else {}
        return Snapshot._from(self._client.call("POST", "sandboxes/%s/snapshot" % self.sandbox_id,
                                                body))

    create_snapshot = snapshot  # E2B's name

    def fork(self, count: int = 1, tag: Optional[str] = None,
             memory: Union[int, str, None] = None, net: Optional[str] = None, envs=None,
             idempotency_key: Optional[str] = None,
             timeout: Optional[float] = None, effects: Optional[bool] = None) -> ForkResult:
        """One snapshot of this sandbox's files, and `count` new sandboxes on it,
        each independent of the others and of this one (a write in one is seen by
        none of them). Like snapshot(), a fork copies files, not processes.
        Returns a list of `count` elements: a Sandbox, or a SandboxException with
        the server's message where that fork failed (the others stand);
        .snapshot is the snapshot; untagged, lis serve removes it with the last
        sandbox on it (give a tag to keep it). memory/net/envs override what the forks
        inherit; timeout is each fork's lifetime as in create() (not inherited).
        effects: the forks record effects (commands.run(effects=True)) as their
        parent does, with its policy; True or False says otherwise.
        Carries an Idempotency-Key like create()."""
        body = {"count": int(count)}
        for k, v in (("tag", tag), ("memory", memory), ("net", net), ("timeout", timeout)):
            if v is not None:
                body[k] = v
        if envs:
            body["env"] = dict(envs)
        if effects is not None:
            body["effects"] = bool(effects)
        doc = self._client.call("POST", "sandboxes/%s/fork" % self.sandbox_id, body,
                                _key(idempotency_key), retry=True)
        out = []
        for el in doc.get("sandboxes") or []:
            if isinstance(el, dict) and el.get("error"):
                # this fork failed (or, in a replay, was deleted since: it has an id)
                status = el.get("status")
                e = (from_status(status, str(el["error"])) if isinstance(status, int)
                     else SandboxException(str(el["error"])))
                e.sandbox_id = el.get("id")
                out.append(e)
            else:
                out.append(Sandbox(el, self._client))
        return ForkResult(out, Snapshot._from(doc.get("snapshot") or {}))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        return False
