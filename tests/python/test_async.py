"""lis.AsyncSandbox: the same features as coroutines."""
import asyncio

import pytest

import lis
from conftest import IMAGE


def test_async_sandbox(server):
    async def main():
        async with await lis.AsyncSandbox.create(IMAGE) as sb:
            rs = await asyncio.gather(*(sb.commands.run("echo %d" % i) for i in range(4)))
            await sb.files.write("/x.txt", "async")
            text = await sb.files.read("/x.txt")
            assert await sb.is_running()
            assert await sb.pause() == sb.sandbox_id
            assert await sb.is_paused()
            assert (await sb.get_info())["state"] == "paused"
            with pytest.raises(lis.ConflictException):
                await sb.commands.run("true")
            assert (await sb.get_metrics()).state == "paused"
            assert await sb.resume() is sb
            snap = await sb.create_snapshot()
            forks = await sb.fork(2)
            try:
                assert all(isinstance(f, lis.AsyncSandbox) for f in forks)
                assert forks.snapshot.id.startswith("sha256:")
                outs = await asyncio.gather(*(f.files.read("/x.txt") for f in forks))
            finally:
                await asyncio.gather(*(f.kill() for f in forks))
            async with await lis.AsyncSandbox.create(snap.id) as child:
                from_snap = await child.files.read("/x.txt")
            listed = [s.id for s in await lis.AsyncSandbox.list_snapshots()]
            same = await lis.AsyncSandbox.connect(sb.sandbox_id)
            return [r.stdout for r in rs], text, outs, from_snap, snap.id in listed, same
    outs, text, fork_texts, from_snap, listed, same = asyncio.run(main())
    assert outs == ["0\n", "1\n", "2\n", "3\n"]
    assert text == "async" and fork_texts == ["async", "async"] and from_snap == "async"
    assert listed
    assert not same.sync.is_running()  # the async with killed it
