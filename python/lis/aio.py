"""lis.AsyncSandbox and lis.AsyncEpisodes: the asyncio twins of lis.Sandbox and
lis.Episodes. Each call runs the blocking client on a worker thread
(asyncio.to_thread), so the event loop never blocks; callbacks (on_stdout/on_stderr)
run on that thread."""
import asyncio
from typing import AsyncIterator, List, Optional

from .episodes import Episodes, Event
from .sandbox import ForkResult, Sandbox, SandboxMetrics, Snapshot


class _AsyncCommands:
    def __init__(self, sb):
        self._sb = sb

    async def run(self, cmd, **kw):
        return await asyncio.to_thread(self._sb.commands.run, cmd, **kw)


class _AsyncFiles:
    def __init__(self, sb):
        self._sb = sb

    def __getattr__(self, name):
        fn = getattr(self._sb.files, name)

        async def call(*a, **kw):
            return await asyncio.to_thread(fn, *a, **kw)
        return call


class AsyncSandbox:
    """Sandbox's methods as coroutines: `sb = await AsyncSandbox.create(...)`,
    `async with`, `await sb.commands.run(...)`, `await sb.fork(4)`, ..."""

    def __init__(self, sb: Sandbox):
        self._sb = sb
        self.sandbox_id = sb.sandbox_id
        self.commands = _AsyncCommands(sb)
        self.files = _AsyncFiles(sb)

    @property
    def sync(self) -> Sandbox:
        """The blocking Sandbox under this one."""
        return self._sb

    @classmethod
    async def create(cls, image, **kw) -> "AsyncSandbox":
        return cls(await asyncio.to_thread(Sandbox.create, image, **kw))

    @classmethod
    async def connect(cls, sandbox_id, **kw) -> "AsyncSandbox":
        return cls(await asyncio.to_thread(Sandbox.connect, sandbox_id, **kw))

    @classmethod
    async def list(cls, **kw) -> List["AsyncSandbox"]:
        return [cls(sb) for sb in await asyncio.to_thread(Sandbox.list, **kw)]

    @classmethod
    async def list_snapshots(cls, **kw) -> List[Snapshot]:
        return await asyncio.to_thread(Sandbox.list_snapshots, **kw)

    @classmethod
    async def get_snapshot(cls, ref, **kw) -> Snapshot:
        return await asyncio.to_thread(Sandbox.get_snapshot, ref, **kw)

    @classmethod
    async def delete_snapshot(cls, ref, **kw) -> bool:
        return await asyncio.to_thread(Sandbox.delete_snapshot, ref, **kw)

    async def kill(self) -> bool:
        return await asyncio.to_thread(self._sb.kill)

    async def is_running(self) -> bool:
        return await asyncio.to_thread(self._sb.is_running)

    async def is_paused(self) -> bool:
        return await asyncio.to_thread(self._sb.is_paused)

    async def get_info(self):
        return await asyncio.to_thread(self._sb.get_info)

    async def set_timeout(self, timeout: float) -> None:
        await asyncio.to_thread(self._sb.set_timeout, timeout)

    async def pause(self) -> str:
        return await asyncio.to_thread(self._sb.pause)

    async def resume(self) -> "AsyncSandbox":
        await asyncio.to_thread(self._sb.resume)
        return self

    async def get_metrics(self) -> SandboxMetrics:
        return await asyncio.to_thread(self._sb.get_metrics)

    async def snapshot(self, tag: Optional[str] = None) -> Snapshot:
        """See Sandbox.snapshot: the files only, not the processes."""
        return await asyncio.to_thread(self._sb.snapshot, tag)

    create_snapshot = snapshot  # E2B's name

    async def fork(self, count: int = 1, **kw) -> ForkResult:
        """See Sandbox.fork: elements are AsyncSandboxes or exceptions."""
        res = await asyncio.to_thread(self._sb.fork, count, **kw)
        return ForkResult([AsyncSandbox(s) if isinstance(s, Sandbox) else s for s in res],
                          res.snapshot)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.kill()
        return False


class AsyncEpisodes:
    """lis.Episodes as coroutines (docs/rl.md): `eps = AsyncEpisodes()`, `await
    eps.submit(...)`, `await eps.results(gid, wait=60)`, `await eps.collect(bodies)`,
    `async for ev in eps.events(eid)`. Each call runs the blocking client on a
    worker thread, so many long-polls can wait at once without blocking the loop."""

    def __init__(self, socket: Optional[str] = None, timeout: Optional[float] = None,
                 start: bool = True):
        self._eps = Episodes(socket, timeout=timeout, start=start)

    @property
    def sync(self) -> Episodes:
        """The blocking Episodes under this one."""
        return self._eps

    def __getattr__(self, name):
        # submit, group, results, cancel_group, episode, cancel, branch, delete,
        # status, set_inference, collect: the same arguments, awaited
        fn = getattr(self._eps, name)
        if name.startswith("_") or not callable(fn) or name == "events":
            return fn

        async def call(*a, **kw):
            return await asyncio.to_thread(fn, *a, **kw)
        call.__name__ = name
        call.__doc__ = fn.__doc__
        return call

    async def events(self, episode_id: str, last_event_id: Optional[int] = None,
                     idle_timeout: Optional[float] = None) -> AsyncIterator[Event]:
        """Episodes.events as an async iterator (resumes with Last-Event-ID the same way)."""
        it = self._eps.events(episode_id, last_event_id, idle_timeout)
        done = object()
        try:
            while True:
                ev = await asyncio.to_thread(next, it, done)
                if ev is done:
                    return
                yield ev
        finally:
            try:
                it.close()  # its connection; a next() still running on its thread ends it
            except ValueError:
                pass
