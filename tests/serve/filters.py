#!/usr/bin/env python3
"""Every list filter dockerd accepts is honoured or refused with dockerd's
words (issue 33 item 1): the same docker CLI and docker-py calls give what
dockerd 20.10 gives for the same containers (run this script against a
dockerd too: the expectations are dockerd's, checked that way).
Usage: filters.py SOCKET IMAGE. Prints one line per check, then
"N passed, M failed"."""
import os
import subprocess
import sys
import time

import docker

from checks import check, finish  # tests/serve/checks.py

SOCK, IMG = sys.argv[1], sys.argv[2]
ENV = dict(os.environ, DOCKER_HOST="unix://" + SOCK)
P = "flt%d" % (os.getpid() % 100000)  # names of this run's containers


def run(*args, env=ENV, timeout=120):
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def docker_cli(*args):
    return run("docker", *args)


def ps(*filters, all_=True):
    """The names (without the run's prefix) docker ps lists with these filters."""
    args = ["ps", "--format", "{{.Names}}"] + (["-a"] if all_ else [])
    for f in filters:
        args += ["--filter", f]
    code, out, err = docker_cli(*args)
    if code != 0:
        return "error: " + err.strip()
    return sorted(n[len(P) + 1:] for n in out.split() if n.startswith(P + "-"))


def expect(filters, want, all_=True):
    got = ps(*filters, all_=all_)
    check(f"ps {'-a ' if all_ else ''}{' '.join('--filter ' + f for f in filters)} -> {want}",
          got == want, f"got {got}")


def refused(cmd, msg):
    code, out, err = docker_cli(*cmd)
    check(f"docker {' '.join(cmd)} refused: {msg}", code != 0 and msg in err, f"{code} {err}")


def filters_main():
    cli = docker.DockerClient(base_url="unix://" + SOCK, timeout=120)
    ids = {}

    def make(name, args):
        code, out, err = docker_cli(*args[:1], "--name", f"{P}-{name}", *args[1:])
        check(f"{name}: docker {args[0]}", code in (0, 3), err)
        ids[name] = cli.containers.get(f"{P}-{name}").id
        time.sleep(1.1)  # distinct creation times (before/since)

    make("a", ["run", "-d", "--label", "app=x", "--label", "tier=web", IMG, "sleep", "300"])
    make("b", ["create", "--label", "app=y", IMG, "true"])
    make("c", ["run", "--label", "app=x", IMG, "sh", "-c", "exit 3"])
    make("d", ["run", "-d", "--network", "none", IMG, "sleep", "300"])

    # labels: the compose case (a value nobody has lists nothing)
    expect(["label=app"], ["a", "b", "c"])
    expect(["label=app=x"], ["a", "c"])
    expect(["label=app=zzz"], [])
    expect(["label=app=x", "label=tier=web"], ["a"])
    expect(["label=nokey"], [])
    # names (a regexp, as dockerd's), ids (a prefix)
    expect([f"name={P}-a"], ["a"])
    expect([f"name=^/?{P}-[ab]$"], ["a", "b"])
    expect([f"id={ids['c'][:10]}"], ["c"])
    expect([f"id={ids['c'][3:12]}"], [])
    # states
    expect(["status=exited"], ["c"])
    expect(["status=created"], ["b"])
    expect(["status=running"], ["a", "d"])
    expect(["status=exited"], ["c"], all_=False)  # a status lists every state
    expect(["exited=3"], ["c"])
    expect(["exited=3"], [], all_=False)
    expect(["exited=0"], [])
    # images, order, networks, the rest
    expect([f"ancestor={IMG}"], ["a", "b", "c", "d"])
    expect(["ancestor=nonexistent:tag"], [])
    expect([f"before={P}-c"], ["a", "b"])
    expect([f"since={P}-a"], ["b", "c", "d"])
    expect([f"since={P}-a", f"before={P}-d"], ["b", "c"])
    expect(["network=none"], ["d"])
    expect(["network=bridge"], ["a", "b", "c"])
    expect(["network=nonexistent"], [])
    expect(["volume=/nonexistent"], [])
    expect(["health=none"], ["a", "b", "c", "d"])
    expect(["health=healthy"], [])
    expect(["is-task=false"], ["a", "b", "c", "d"])
    expect(["is-task=true"], [])
    expect(["isolation=default"], ["a", "b", "c", "d"])
    expect(["publish=8000"], [])
    expect(["expose=80/tcp"], [])
    # refused with dockerd's words
    refused(["ps", "-a", "--filter", "bogus=1"], "Invalid filter 'bogus'")
    refused(["ps", "-a", "--filter", "status=bad"], "Invalid filter 'status=bad'")
    refused(["ps", "-a", "--filter", "health=bad"], "Unrecognised filter value for health: bad")
    refused(["ps", "-a", "--filter", "is-task=x"], "Invalid filter 'is-task=[x]'")
    refused(["ps", "-a", "--filter", "exited=x"], 'strconv.Atoi: parsing "x": invalid syntax')
    refused(["ps", "-a", "--filter", "publish=1:2"],
            "filter for 'publish' should not contain ':': 1:2")
    refused(["ps", "-a", "--filter", "before=nonexistent"], "no such container nonexistent")
    # docker-py sends the other encoding ({"k": ["v"]})
    got = sorted(c.name[len(P) + 1:] for c in cli.containers.list(all=True, filters={"label": "app=x"})
                 if c.name.startswith(P + "-"))
    check("docker-py containers.list(filters={'label': 'app=x'}) -> a, c", got == ["a", "c"], got)
    got = [c for c in cli.containers.list(all=True, filters={"label": "app=zzz"})]
    check("docker-py label=app=zzz -> none", got == [], got)
    try:
        cli.containers.list(all=True, filters={"bogus": "1"})
        check("docker-py filters={'bogus': '1'} -> APIError 400", False, "listed")
    except docker.errors.APIError as e:
        check("docker-py filters={'bogus': '1'} -> APIError 400",
              e.status_code == 400 and "Invalid filter 'bogus'" in str(e), str(e))

    # images
    def images(*filters):
        args = ["images", "--format", "{{.Repository}}:{{.Tag}}"]
        for f in filters:
            args += ["--filter", f]
        code, out, err = docker_cli(*args)
        return ("error: " + err.strip()) if code else IMG in out.split()

    for flt, want in ((["reference=" + IMG.split(":")[0]], True), (["reference=" + IMG], True),
                      (["reference=" + IMG[:3] + "*"], True), (["reference=zzz*"], False),
                      (["label=x"], False), (["dangling=true"], False), (["dangling=false"], True),
                      ([f"since={IMG}"], False), ([f"before={IMG}"], False)):
        got = images(*flt)
        check(f"images --filter {' '.join(flt)} -> {'listed' if want else 'not listed'}",
              got == want, got)
    refused(["images", "--filter", "bogus=1"], "Invalid filter 'bogus'")
    refused(["images", "--filter", "dangling=x"], "Invalid filter 'dangling=[x]'")
    refused(["images", "--filter", "before=nonexistent"], "No such image: nonexistent:latest")
    # networks and volumes refuse an unknown key too
    refused(["network", "ls", "--filter", "bogus=1"], "Invalid filter 'bogus'")
    refused(["volume", "ls", "--filter", "bogus=1"], "Invalid filter 'bogus'")

    for n in ids:
        docker_cli("rm", "-f", f"{P}-{n}")


filters_main()
finish()
