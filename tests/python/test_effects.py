"""What a command did, through the native API (issue 23): commands.run(effects=True)
gives the step's effects as objects, compared exactly with what the command did; a
sandbox's own policy denies an exec; the refusals (no effects recorded, a bad policy)."""
import pytest

import lis
from conftest import IMAGE


def test_run_with_effects_gives_what_the_command_did(server):
    with lis.Sandbox.create(image=IMAGE, net="none") as sb:
        r = sb.commands.run("mkdir /w && echo one > /w/a.txt && echo two > /w/b.txt && "
                            "mv /w/b.txt /w/c.txt && rm /w/a.txt && python3 -c 'exit(3)'; "
                            "echo done", effects=True)
        assert (r.exit_code, r.stdout) == (0, "done\n")
        fx = r.effects
        assert isinstance(fx, lis.Effects)
        assert sorted((f.change, f.path) for f in fx.files) == [("created", "/w"),
                                                                 ("created", "/w/c.txt")]
        c = [f for f in fx.files if f.path == "/w/c.txt"][0]
        assert c.size == 4 and c.kind == "f" and "+two\n" in c.diff
        py = [p for p in fx.processes if p.argv[:1] == ["python3"]]
        assert len(py) == 1 and py[0].state == "exited" and py[0].exit_code == 3
        assert ["mv", "/w/b.txt", "/w/c.txt"] in fx.programs
        assert fx.capability.file and fx.capability.computation and not fx.capability.external
        assert fx.alerts == [] and fx.network.requests == []
        # the next one is the next step; without effects=True nothing is returned
        r2 = sb.commands.run("rm /w/c.txt", effects=True)
        assert r2.effects.step == fx.step + 1
        assert [(f.change, f.path) for f in r2.effects.files] == [("deleted", "/w/c.txt")]
        assert sb.commands.run("true").effects is None


def test_a_sandbox_policy_denies_an_exec_and_flags_a_write(server):
    policy = ("rules:\n"
              "  - name: no-python\n    on: exec\n    argv: \"python3 *\"\n    action: deny\n"
              "  - name: etc\n    on: write\n    path: \"/etc/*\"\n    action: flag\n")
    with lis.Sandbox.create(image=IMAGE, net="none", policy=policy) as sb:
        r = sb.commands.run("python3 -c 'print(1)'; echo rc=$?; echo x > /etc/x", effects=True)
        assert "rc=0" not in r.stdout and "Permission denied" in r.stderr
        denied = [p for p in r.effects.processes if p.argv[:1] == ["python3"]]
        assert denied and all(p.state == "denied" and p.denied_by == "no-python"
                              for p in denied)
        rules = sorted({(a.rule, a.action) for a in r.effects.alerts})
        assert rules == [("etc", "flag"), ("no-python", "deny")]


def test_refusals(server):
    with lis.Sandbox.create(image=IMAGE, effects=False) as sb:
        with pytest.raises(lis.ConflictException):
            sb.commands.run("true", effects=True)
        assert sb.commands.run("echo ok").stdout == "ok\n"
    with pytest.raises(lis.InvalidArgumentException) as e:
        lis.Sandbox.create(image=IMAGE, policy="rules:\n  - name: x\n    on: nope\n")
    assert "policy:3:" in str(e.value)


def test_forks_are_monitored_like_their_parent(server):
    """issue 32 item 4: a fork of a sandbox with effects records them too (and its
    policy holds there); fork(effects=False) turns them off, and the refusal then names
    the fork, not an "effects": false the user never passed."""
    policy = "rules:\n  - name: no-python\n    on: exec\n    argv: \"python3 *\"\n    action: deny\n"
    with lis.Sandbox.create(image=IMAGE, net="none", policy=policy) as sb:
        sb.commands.run("mkdir /w && echo one > /w/a.txt")
        forks = sb.fork(count=2)
        try:
            for k in forks:
                assert isinstance(k, lis.Sandbox), k
                r = k.commands.run("echo two > /w/b.txt; python3 -c 'print(1)'; echo rc=$?",
                                   effects=True)
                assert [(f.change, f.path) for f in r.effects.files] == [("created", "/w/b.txt")]
                assert "rc=0" not in r.stdout
                assert {a.rule for a in r.effects.alerts} == {"no-python"}
        finally:
            for k in forks:
                if isinstance(k, lis.Sandbox):
                    k.kill()
        off = sb.fork(effects=False)
        try:
            with pytest.raises(lis.ConflictException) as e:
                off[0].commands.run("true", effects=True)
            assert "fork" in str(e.value) and "\"effects\": false" not in str(e.value)
        finally:
            off[0].kill()
