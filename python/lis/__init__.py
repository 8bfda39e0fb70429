"""lis: a stdlib-only client for `lis serve`'s native API (docs/api.md, python/README.md)."""
from .aio import AsyncEpisodes, AsyncSandbox
from .cluster import Cluster
from .episodes import Episodes, Event, GroupResult, StepResult
from .effects import Alert, Capability, Effects, FileChange, Network, Process, Request
from .errors import (ConflictException, InvalidArgumentException, NotFoundException,
                     NotImplementedException, SandboxException, TimeoutException)
from .sandbox import (CommandResult, EntryInfo, ForkResult, Sandbox, SandboxMetrics,
                      Snapshot)

__all__ = ["Sandbox", "AsyncSandbox", "CommandResult", "EntryInfo", "Snapshot",
           "SandboxMetrics", "ForkResult", "SandboxException", "InvalidArgumentException",
           "NotFoundException", "ConflictException", "NotImplementedException",
           "TimeoutException", "Effects", "FileChange", "Process", "Request", "Network",
           "Alert", "Capability", "Episodes", "AsyncEpisodes", "Event", "GroupResult",
           "StepResult", "Cluster"]
__version__ = "0.1.0"
