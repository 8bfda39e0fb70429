"""lis: a stdlib-only client for `lis serve`'s native API (docs/api.md)."""
from .aio import AsyncSandbox
from .errors import (ConflictException, InvalidArgumentException, NotFoundException,
                     NotImplementedException, SandboxException, TimeoutException)
from .sandbox import CommandResult, EntryInfo, Sandbox

__all__ = ["Sandbox", "AsyncSandbox", "CommandResult", "EntryInfo", "SandboxException",
           "InvalidArgumentException", "NotFoundException", "ConflictException",
           "NotImplementedException", "TimeoutException"]
__version__ = "0.1.0"
