"""What a command did in its sandbox (lis serve's native API, docs/monitoring.md): the
effects object of an exec run with effects=True, as plain objects. Every field of the
server's JSON is kept: unknown ones in `raw`, so a newer server loses nothing."""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class FileChange:
    change: str              # created, modified, deleted, renamed, linked
    path: str
    kind: str = ""           # f d l o
    size: int = 0
    mode: str = ""
    size_delta: int = 0
    from_path: Optional[str] = None   # renamed: the old path
    link_of: Optional[str] = None     # linked: the other name
    diff: Optional[str] = None        # a unified diff of a small text file
    no_diff: Optional[str] = None     # why there is none
    diff_cut: bool = False
    between_steps: bool = False


@dataclass
class Process:
    pid: int
    ppid: int
    path: str
    argv: List[str]
    state: str               # running, exited, killed, exec, denied
    via: str = "execve"
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    cpu_seconds: float = 0.0
    left_running: bool = False
    from_step: Optional[int] = None
    denied_by: Optional[str] = None
    unreadable: Optional[str] = None
    cut: bool = False


@dataclass
class Request:
    host: str
    port: int
    method: str
    address: str = ""
    allowed: bool = True
    bytes_up: int = 0
    bytes_down: int = 0
    dns: bool = False
    reason: Optional[str] = None      # why the proxy refused or failed it
    rule: Optional[str] = None        # the policy rule that matched it


@dataclass
class Network:
    requests: List[Request] = field(default_factory=list)
    refused_connects: int = 0                              # --net none: attempts refused
    refused: List[Dict[str, Any]] = field(default_factory=list)
    local_connects: int = 0


@dataclass
class Alert:
    rule: str
    action: str              # flag, deny, pause, stop
    what: str = ""


@dataclass
class Capability:
    external: bool = False
    file: bool = False
    computation: bool = False
    why: Dict[str, str] = field(default_factory=dict)


@dataclass
class Effects:
    step: int
    files: List[FileChange]
    processes: List[Process]
    network: Network
    resources: Dict[str, Any]
    capability: Capability
    alerts: List[Alert]
    cut: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def programs(self) -> List[List[str]]:
        """The argv of every program the command ran, in order."""
        return [p.argv for p in self.processes]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Effects":
        def pick(klass, src, rename=None):
            names = klass.__dataclass_fields__
            kw = {}
            for k, v in src.items():
                k = (rename or {}).get(k, k)
                if k in names:
                    kw[k] = v
            return klass(**kw)
        net = d.get("network") or {}
        cap = d.get("capability") or {}
        return cls(
            step=int(d.get("step", 0)),
            files=[pick(FileChange, f, {"from": "from_path"}) for f in d.get("files") or []],
            processes=[pick(Process, p) for p in d.get("processes") or []],
            network=Network(requests=[pick(Request, r) for r in net.get("requests") or []],
                            refused_connects=int(net.get("refused_connects", 0)),
                            refused=list(net.get("refused") or []),
                            local_connects=int(net.get("local_connects", 0))),
            resources=dict(d.get("resources") or {}),
            capability=Capability(external=bool(cap.get("external")), file=bool(cap.get("file")),
                                  computation=bool(cap.get("computation")),
                                  why={k[:-4]: v for k, v in cap.items() if k.endswith("_why")}),
            alerts=[pick(Alert, a) for a in d.get("alerts") or []],
            cut=dict(d.get("cut") or {}),
            raw=d)
