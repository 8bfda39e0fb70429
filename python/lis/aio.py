"""lis.AsyncSandbox: the asyncio twin of lis.Sandbox. Each call runs the blocking
client on a worker thread (asyncio.to_thread), so the event loop never blocks;
callbacks (on_stdout/on_stderr) run on that thread."""
import asyncio

from .sandbox import Sandbox


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
    def __init__(self, sb):
        self._sb = sb
        self.sandbox_id = sb.sandbox_id
        self.commands = _AsyncCommands(sb)
        self.files = _AsyncFiles(sb)

    @classmethod
    async def create(cls, image, **kw):
        return cls(await asyncio.to_thread(Sandbox.create, image, **kw))

    @classmethod
    async def connect(cls, sandbox_id, **kw):
        return cls(await asyncio.to_thread(Sandbox.connect, sandbox_id, **kw))

    async def kill(self):
        return await asyncio.to_thread(self._sb.kill)

    async def is_running(self):
        return await asyncio.to_thread(self._sb.is_running)

    async def get_info(self):
        return await asyncio.to_thread(self._sb.get_info)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.kill()
        return False
