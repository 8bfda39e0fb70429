#!/usr/bin/env python3
"""Debian's docker-compose (1.29) against `lis serve` (issue 33 items 1 and 4).
bystander: up / down --remove-orphans of two projects beside a container of
no project, which must survive. network: a default compose file (its project
network) with a server and a client that reaches it by service name and by
alias; a container off the network reaches neither; down leaves no
container, network or server fd behind.
Usage: compose.py SOCKET SERVER_PID IMAGE bystander|network. Prints one line
per check, then "N passed, M failed"."""
import os
import subprocess
import sys
import tempfile
import time

from checks import check, finish  # tests/serve/checks.py

SOCK, PID, IMG, MODE = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ENV = dict(os.environ, DOCKER_HOST="unix://" + SOCK)
P = "cmp%d" % (os.getpid() % 100000)


def run(*args, timeout=300):
    try:
        r = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "", f"{args[0]} {args[1]}: no answer in {timeout} s"
    return r.returncode, r.stdout, r.stderr


def names():
    code, out, err = run("docker", "ps", "-a", "--format", "{{.Names}}")
    return sorted(n for n in out.split() if n.startswith(P))


def compose_file(text):
    d = tempfile.mkdtemp(prefix="lis-compose-")
    path = os.path.join(d, "docker-compose.yml")
    with open(path, "w") as f:
        f.write(text % {"img": IMG})
    return lambda *args: run("docker-compose", "-f", path, *args)


def fds():
    return len(os.listdir(f"/proc/{PID}/fd"))


BYSTANDER = """version: "3"
services:
  app:
    image: %(img)s
    command: sleep 300
    network_mode: none
"""

NETWORK = """version: "3"
services:
  web:
    image: %(img)s
    command: python3 -m http.server 8000
    networks:
      default:
        aliases: [api]
  client:
    image: %(img)s
    depends_on: [web]
    command:
      - python3
      - -c
      - |
        import socket, time, urllib.request
        for name in ("web", "api"):
            for i in range(60):
                try:
                    r = urllib.request.urlopen("http://%%s:8000/" %% name, timeout=5)
                    print("GOT", r.status, name, flush=True)
                    break
                except OSError:
                    time.sleep(0.5)
        try:  # egress stays the server's mode (--net none here): nowhere
            socket.create_connection(("192.0.2.1", 80), timeout=3)
            print("EGRESS open", flush=True)
        except OSError:
            print("EGRESS closed", flush=True)
        time.sleep(300)
"""


def bystander():
    compose = compose_file(BYSTANDER)
    code, out, err = run("docker", "run", "-d", "--name", f"{P}-bystander", IMG, "sleep", "300")
    check("a bystander runs", code == 0, err)
    code, out, err = compose("-p", f"{P}-p", "up", "-d")
    check("compose up -d", code == 0, out + err)
    code, out, err = compose("-p", f"{P}-other", "down", "--remove-orphans")
    check("compose -p other down --remove-orphans", code == 0, out + err)
    check("the bystander and the project survive another project's down --remove-orphans",
          names() == [f"{P}-bystander", f"{P}-p_app_1"], names())
    code, out, err = compose("-p", f"{P}-p", "down", "--remove-orphans")
    check("compose down --remove-orphans", code == 0, out + err)
    check("down removed its container, and only it", names() == [f"{P}-bystander"], names())
    run("docker", "rm", "-f", f"{P}-bystander")


def network():
    compose = compose_file(NETWORK)
    run("docker", "run", "--rm", IMG, "true")  # what the first container opens for good
    before = fds()
    code, out, err = run("docker", "run", "-d", "--name", f"{P}-outsider", IMG, "sleep", "300")
    check("a container off the network runs", code == 0, err)
    code, out, err = compose("-p", P, "up", "-d")
    check("compose up -d (a project network)", code == 0, out + err)
    logs = ""
    for _ in range(120):
        code, logs, err = run("docker", "logs", f"{P}_client_1")
        if "EGRESS" in logs:
            break
        time.sleep(0.5)
    check("the client reaches the server by its service name", "GOT 200 web" in logs, logs)
    check("the client reaches the server by its alias", "GOT 200 api" in logs, logs)
    check("the client's egress is still the server's mode", "EGRESS closed" in logs, logs)
    code, out, err = run("docker", "network", "inspect", "-f", "{{len .Containers}}",
                         f"{P}_default")
    check("network inspect lists both members", out.strip() == "2", out + err)
    code, out, err = run("docker", "network", "ls", "--filter", f"name={P}_default", "--format",
                         "{{.Name}}")
    check("network ls --filter name lists it", out.split() == [f"{P}_default"], out + err)
    # off the network: neither the name nor the member's address leads anywhere
    code, ip, err = run("docker", "inspect", "-f",
                        "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", f"{P}_web_1")
    probe = ("import socket\nfor h in ('web', %r):\n    try:\n"
             "        socket.create_connection((h, 8000), timeout=3); print('REACHED', h)\n"
             "    except OSError as e: print('NO', h, e)\n") % ip.strip()
    code, out, err = run("docker", "exec", f"{P}-outsider", "python3", "-c", probe)
    check(f"a container off the network reaches neither web nor {ip.strip()}",
          "REACHED" not in out and out.count("NO ") == 2, out + err)
    code, out, err = compose("-p", P, "down")
    check("compose down", code == 0, out + err)
    code, out, err = run("docker", "network", "ls", "--format", "{{.Name}}")
    check("down removed the project network", f"{P}_default" not in out.split(), out)
    run("docker", "rm", "-f", f"{P}-outsider")
    check("no container left", names() == [], names())
    time.sleep(1)
    after = fds()
    print(f"info server fds {before} before up, {after} after down", flush=True)
    check("the server holds no more fds than before", after <= before, f"{before} -> {after}")


{"bystander": bystander, "network": network}[MODE]()
finish()
