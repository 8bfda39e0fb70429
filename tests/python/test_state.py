"""pause / resume / stats, snapshot and fork through the client against a real
lis serve."""
import time

import pytest

import lis
from conftest import IMAGE, wait_until

BUSY = "sh -c 'while :; do :; done' >/dev/null 2>&1 </dev/null & echo started"


def cpu(sb):
    return sb.get_metrics().cpu_seconds


def test_pause_refuses_exec_stops_cpu_and_resume_goes_on(sb):
    assert sb.commands.run(BUSY).stdout == "started\n"
    c0 = cpu(sb)
    assert c0 is not None, sb.get_metrics().raw
    assert wait_until(lambda: cpu(sb) > c0), "the busy loop never used CPU"

    assert sb.pause() == sb.sandbox_id
    assert sb.is_paused() and not sb.is_running()
    assert sb.get_info()["state"] == "paused"
    m = sb.get_metrics()
    assert m.state == "paused" and m["state"] == "paused"
    with pytest.raises(lis.ConflictException) as ei:
        sb.commands.run("echo never")
    assert "paused" in ei.value.message and "\n" not in ei.value.message
    # a paused sandbox costs no CPU: its CPU time stays where it was
    p0 = cpu(sb)
    time.sleep(0.7)
    assert cpu(sb) == p0
    # its files can still be written
    sb.files.write("/tmp/while-paused", "x")

    assert sb.resume() is sb
    assert sb.is_running() and sb.get_info()["state"] == "running"
    assert wait_until(lambda: cpu(sb) > p0), "the busy loop did not go on after resume"
    assert sb.commands.run("cat /tmp/while-paused").stdout == "x"


def test_metrics_name_what_the_sandbox_uses(sb):
    assert sb.commands.run("mkdir -p /work && head -c 1048576 /dev/urandom > /work/blob").exit_code == 0
    m = sb.get_metrics()
    assert isinstance(m, lis.SandboxMetrics)
    assert m.state == "running" and m["id"] == sb.sandbox_id
    assert m.mem_used and m.mem_used > 0
    assert m.mem_total == 512 << 20  # the server's --memory
    assert m.disk_used >= 1 << 20
    assert m.disk_total is None or m.disk_total >= m.disk_used
    assert m.pids and m.pids >= 1
    assert m.cpu_seconds is not None and m.cpu_seconds >= 0


def test_snapshot_holds_the_files_and_creates_new_sandboxes(server):
    with lis.Sandbox.create(image=IMAGE) as sb:
        sb.files.write("/work/state.txt", "step 7\n")
        sb.commands.run("sleep 1000 >/dev/null 2>&1 </dev/null &")
        # the background shell may not have exec'd sleep yet when the command returns
        assert wait_until(lambda: sb.commands.run("pgrep -x sleep").exit_code == 0)
        snap = sb.snapshot(tag="py-snap-1")
        assert isinstance(snap, lis.Snapshot)
        assert snap.id.startswith("sha256:") and snap.snapshot_id == snap.id
        assert snap.tag == "py-snap-1:latest" and snap.depth == 2
        assert snap.parent and snap.parent.startswith("sha256:")
        assert snap.files >= 1 and snap.bytes >= len("step 7\n") and not snap.existed
        assert snap.paused_ms is not None and snap.paused_ms >= 0
        # the sandbox goes on running after its snapshot
        assert sb.is_running()
        sb.files.write("/work/state.txt", "step 8\n")
        again = sb.create_snapshot()  # E2B's name, no tag
        assert again.id != snap.id and again.id.startswith("sha256:") and again.tag is None
        same = sb.snapshot()  # nothing changed: the same content, stored once
        assert same.id == again.id and same.existed
    listed = {s.id: s for s in lis.Sandbox.list_snapshots()}
    assert {snap.id, again.id} <= set(listed)
    assert "py-snap-1:latest" in listed[snap.id].tags and listed[snap.id].depth == 2
    got = lis.Sandbox.get_snapshot("py-snap-1:latest")
    assert got.id == snap.id and got.parent == snap.parent
    with pytest.raises(lis.NotFoundException):
        lis.Sandbox.get_snapshot("no-such-snapshot:v9")
    for image in (snap.id, "py-snap-1:latest", snap):
        with lis.Sandbox.create(image=image) as child:
            assert child.files.read("/work/state.txt") == "step 7\n"
            # files only: no process of the snapshotted sandbox came along
            assert child.commands.run("pgrep -x sleep").exit_code == 1
    with lis.Sandbox.create(image=again) as child:
        assert child.files.read("/work/state.txt") == "step 8\n"
        with pytest.raises(lis.ConflictException):  # a sandbox runs on it
            lis.Sandbox.delete_snapshot(again)
    assert lis.Sandbox.delete_snapshot(again) is True
    with pytest.raises(lis.NotFoundException):
        lis.Sandbox.get_snapshot(again.id)
    with pytest.raises(lis.NotFoundException):
        lis.Sandbox.delete_snapshot(again.id)


def test_fork_4_each_independent(server):
    with lis.Sandbox.create(image=IMAGE) as parent:
        parent.files.write("/work/shared.txt", "from the parent\n")
        forks = parent.fork(4)
        try:
            assert isinstance(forks, lis.ForkResult) and len(forks) == 4
            assert all(isinstance(f, lis.Sandbox) for f in forks), forks
            assert len({f.sandbox_id for f in forks} | {parent.sandbox_id}) == 5
            assert forks.snapshot.id.startswith("sha256:")
            for i, f in enumerate(forks):
                assert f.files.read("/work/shared.txt") == "from the parent\n"
                r = f.commands.run("echo %d > /work/shared.txt; echo mine > /work/only-%d" % (i, i))
                assert r.exit_code == 0
            for i, f in enumerate(forks):
                assert f.files.read("/work/shared.txt") == "%d\n" % i
                names = sorted(e.name for e in f.files.list("/work"))
                assert names == ["only-%d" % i, "shared.txt"]
            assert parent.files.read("/work/shared.txt") == "from the parent\n"
            assert not parent.files.exists("/work/only-0")
            # a fork can be forked and snapshotted in turn
            grand = forks[0].fork(1)
            assert grand[0].files.read("/work/shared.txt") == "0\n"
            assert grand.snapshot.depth > forks.snapshot.depth
            grand[0].kill()
        finally:
            for f in forks:
                if isinstance(f, lis.Sandbox):
                    f.kill()


def test_fork_options_and_a_retried_fork_makes_no_more(server):
    with lis.Sandbox.create(image=IMAGE, envs={"A": "parent", "B": "kept"}) as parent:
        forks = parent.fork(2, memory="300m", envs={"A": "fork"}, tag="py-fork:v1",
                            idempotency_key="fork-k-1")
        try:
            assert len(forks) == 2 and forks.snapshot.tag == "py-fork:v1"
            for f in forks:
                assert f.get_info()["memory"] == 300 << 20
                assert f.get_info()["image"] == forks.snapshot.id
                assert f.commands.run("echo $A $B").stdout == "fork kept\n"
            again = parent.fork(2, idempotency_key="fork-k-1")
            assert [f.sandbox_id for f in again] == [f.sandbox_id for f in forks]
            assert again.snapshot.id == forks.snapshot.id
        finally:
            for f in forks:
                f.kill()


def test_a_fork_element_that_failed_is_an_exception(server):
    """A replay of a fork whose second sandbox was deleted since: that element is
    an error (the others stand), with the server's message."""
    with lis.Sandbox.create(image=IMAGE) as parent:
        forks = parent.fork(3, idempotency_key="fork-k-2")
        try:
            assert forks[1].kill()
            again = parent.fork(3, idempotency_key="fork-k-2")
            assert len(again) == 3
            assert isinstance(again[0], lis.Sandbox) and again[0].sandbox_id == forks[0].sandbox_id
            assert isinstance(again[2], lis.Sandbox) and again[2].sandbox_id == forks[2].sandbox_id
            err = again[1]
            assert isinstance(err, lis.SandboxException) and not isinstance(err, lis.Sandbox)
            assert "deleted" in err.message and err.sandbox_id == forks[1].sandbox_id
            assert again[0].commands.run("echo alive").stdout == "alive\n"
        finally:
            for f in forks:
                f.kill()


def test_errors_of_state_calls(server):
    sb = lis.Sandbox.create(image=IMAGE)
    sb.kill()
    for call in (sb.pause, sb.resume, sb.get_metrics, sb.snapshot, lambda: sb.fork(2)):
        with pytest.raises(lis.NotFoundException):
            call()
    with pytest.raises(lis.NotFoundException):
        lis.Sandbox.create(image="sha256:" + "0" * 64)
    with lis.Sandbox.create(image=IMAGE) as sb:
        with pytest.raises(lis.InvalidArgumentException):
            sb.fork(0)
