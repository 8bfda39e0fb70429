"""unittest of the stdlib client python/lis against a real lis serve (LIS_SOCKET)
with the Debian fixture as lis-test:v1; run from python/ (the checkout import)."""
import asyncio
import os
import signal
import tempfile
import time
import unittest

import lis
from lis._http import Client

IMAGE = "lis-test:v1"


class ClientTest(unittest.TestCase):
    def test_commands_run(self):
        with lis.Sandbox.create(image=IMAGE, memory="256m", net="none",
                                envs={"WHO": "lis"}) as sb:
            seen_out, seen_err = [], []
            r = sb.commands.run("echo hello $WHO; echo oops >&2; exit 4", timeout=30,
                                on_stdout=seen_out.append, on_stderr=seen_err.append)
            self.assertIsInstance(r, lis.CommandResult)
            self.assertEqual((r.exit_code, r.stdout, r.stderr), (4, "hello lis\n", "oops\n"))
            self.assertEqual("".join(seen_out), "hello lis\n")
            self.assertEqual("".join(seen_err), "oops\n")
            r = sb.commands.run(["python3", "-c", "import os; print(os.getcwd(), os.environ['X'])"],
                                cwd="/tmp", envs={"X": "y"})
            self.assertEqual((r.exit_code, r.stdout), (0, "/tmp y\n"))
            with self.assertRaises(lis.TimeoutException):
                sb.commands.run("sleep 30", timeout=1)
            self.assertTrue(sb.is_running())
            self.assertEqual(sb.get_info()["memory"], 256 << 20)

    def test_files(self):
        with lis.Sandbox.create(image=IMAGE) as sb:
            info = sb.files.write("/data/a/notes.txt", "line 1\n")
            self.assertEqual((info.name, info.type, info.size), ("notes.txt", "file", 7))
            sb.files.write("/data/a/raw.bin", b"\x00\x01\xfe")
            self.assertEqual(sb.files.read("/data/a/notes.txt"), "line 1\n")
            self.assertEqual(sb.files.read("/data/a/raw.bin", format="bytes"), b"\x00\x01\xfe")
            names = sorted((e.name, e.type) for e in sb.files.list("/data/a"))
            self.assertEqual(names, [("notes.txt", "file"), ("raw.bin", "file")])
            self.assertTrue(sb.files.exists("/data/a"))
            self.assertFalse(sb.files.exists("/data/nope"))
            with self.assertRaises(lis.NotFoundException) as cm:
                sb.files.read("/data/nope")
            self.assertIn("/data/nope", str(cm.exception))
            self.assertEqual(sb.commands.run("cat /data/a/notes.txt").stdout, "line 1\n")

    def test_errors_and_kill(self):
        with self.assertRaises(lis.NotFoundException) as cm:
            lis.Sandbox.create(image="no-such-image:v0")
        self.assertIn("No such image", cm.exception.message)
        self.assertIn("lis rootfs pull", cm.exception.message)  # how to get it
        self.assertIn("lis rootfs import", cm.exception.message)
        with self.assertRaises(lis.InvalidArgumentException):
            lis.Sandbox.create(image=IMAGE, net="everywhere")
        sb = lis.Sandbox.create(image=IMAGE)
        with self.assertRaises(lis.InvalidArgumentException):
            sb.snapshot("bad tag!")
        with self.assertRaises(lis.InvalidArgumentException):
            sb.fork(0)
        self.assertEqual(sb.pause(), sb.sandbox_id)
        with self.assertRaises(lis.ConflictException) as cm:
            sb.commands.run("true")
        self.assertIn("sb.resume()", cm.exception.message)
        self.assertTrue(sb.resume().is_running())
        same = lis.Sandbox.connect(sb.sandbox_id)
        self.assertEqual(same.sandbox_id, sb.sandbox_id)
        self.assertTrue(sb.kill())
        self.assertFalse(sb.kill())
        self.assertFalse(sb.is_running())
        with self.assertRaises(lis.NotFoundException):
            sb.commands.run("true")

    def test_idempotency_key(self):
        a = lis.Sandbox.create(image=IMAGE, idempotency_key="idem-py-1")
        try:
            b = lis.Sandbox.create(image=IMAGE, idempotency_key="idem-py-1")
            self.assertEqual(a.sandbox_id, b.sandbox_id)
            listed = lis.Sandbox.list()
            self.assertTrue(all(isinstance(s, lis.Sandbox) for s in listed), listed)
            ids = [s.sandbox_id for s in listed]
            self.assertEqual(ids.count(a.sandbox_id), 1)
            mine = [s for s in listed if s.sandbox_id == a.sandbox_id][0]
            self.assertEqual(mine.commands.run("echo listed").stdout, "listed\n")
        finally:
            a.kill()

    def test_async_sandbox(self):
        async def main():
            async with await lis.AsyncSandbox.create(IMAGE) as sb:
                rs = await asyncio.gather(*(sb.commands.run("echo %d" % i) for i in range(4)))
                await sb.files.write("/x.txt", "async")
                return [r.stdout for r in rs], await sb.files.read("/x.txt")
        outs, text = asyncio.run(main())
        self.assertEqual(outs, ["0\n", "1\n", "2\n", "3\n"])
        self.assertEqual(text, "async")

    def test_starts_a_server_on_demand(self):
        d = tempfile.mkdtemp(prefix="lis-py-")
        path = os.path.join(d, "sock", "lis.sock")
        c = Client(path)  # none runs there: the client starts lis serve (LIS_BIN)
        self.assertIsNotNone(c.started)
        try:
            with lis.Sandbox.create(image=IMAGE, socket=path) as sb:
                self.assertEqual(sb.commands.run("echo up").stdout, "up\n")
            self.assertIsNone(Client(path).started)  # the second finds it running
        finally:
            c.started.send_signal(signal.SIGTERM)
            self.assertEqual(c.started.wait(60), 0)

    def test_auto_started_server_exits_when_idle(self):
        """As podman's system service --time: a sandbox keeps it, its end lets it go."""
        d = tempfile.mkdtemp(prefix="lis-py-")
        path = os.path.join(d, "sock", "lis.sock")
        os.environ["LIS_IDLE_TIMEOUT"] = "2"  # for both servers this test starts
        c = Client(path)
        self.assertIsNotNone(c.started)
        try:
            sb = lis.Sandbox.create(image=IMAGE, socket=path)
            time.sleep(4)  # twice the idle time: a live sandbox keeps it
            self.assertIsNone(c.started.poll(), "it exited with a sandbox left")
            self.assertEqual(sb.commands.run("echo still").stdout, "still\n")
            t0 = time.monotonic()
            sb.kill()
            self.assertEqual(c.started.wait(30), 0)
            print("info auto-started server exited %.1f s after its last sandbox (idle time 2 s)"
                  % (time.monotonic() - t0), flush=True)
            self.assertFalse(os.path.exists(path), "it left its socket")
            # the next client starts a new one, which goes the same way
            with lis.Sandbox.create(image=IMAGE, socket=path) as sb2:
                second = sb2._client.started
                self.assertIsNotNone(second)
                self.assertEqual(sb2.commands.run("echo again").stdout, "again\n")
            self.assertEqual(second.wait(30), 0)
        finally:
            del os.environ["LIS_IDLE_TIMEOUT"]
            for p in (c.started, locals().get("second")):
                if p is not None and p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    p.wait(60)


if __name__ == "__main__":
    unittest.main()
